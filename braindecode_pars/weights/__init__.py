"""Encoders shipped with the package, loaded by name (``load_encoder("pars-small-v2")``).

This package is the data folder of the shipped encoders. Each is a folder in the
layout of braindecode's Hugging Face mixin (``config.json`` and
``model.safetensors``, read by
:meth:`PatchEncoder.from_pretrained <braindecode_pars.PatchEncoder>`), with a model
card (``README.md``: data and licences, preprocessing, settings, skill reached, how
to reproduce) and the whole pretext model (``pretext.safetensors`` and
``pretext.json``), so that its shift predictions can be drawn.

It holds their names and no other code, and imports nothing, so that the command
line's help names the default without importing torch: the paths and the functions
that read and write these folders are in :mod:`braindecode_pars.hub.folders`
(``pretrained_path``, ``load_encoder``, ``load_pretext_model``, ``export_run``).
"""

#: Names of the shipped encoders: ``pars-small`` (55 channel-hours of 29 people, 14,960
#: steps; kept for reproducibility) and ``pars-small-v2`` (the same size on 89.5
#: channel-hours of 94 people and three kinds of device, 42,336 steps).
PRETRAINED_ENCODERS = ("pars-small", "pars-small-v2")
#: The shipped encoder that every default names: ``PARSClassifier()``'s probe,
#: :class:`~braindecode_pars.oeb.PARSBackbone`, the MOABB pipeline and the demo (the
#: newest one).
DEFAULT_ENCODER = "pars-small-v2"

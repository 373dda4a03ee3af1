"""Encoders shipped with the package, loaded by name (``load_encoder("pars-small")``).

This package is the data folder of the shipped encoders. Each is a folder in the
layout of braindecode's Hugging Face mixin (``config.json`` and
``model.safetensors``, read by
:meth:`PatchEncoder.from_pretrained <braindecode_pars.PatchEncoder>`), with a model
card (``README.md``: data and licences, preprocessing, settings, skill reached, how
to reproduce) and the whole pretext model (``pretext.safetensors`` and
``pretext.json``), so that its shift predictions can be drawn.

It holds no code: the names, paths and the functions that read and write these
folders are in :mod:`braindecode_pars.hub` (``PRETRAINED_ENCODERS``,
``pretrained_path``, ``load_encoder``, ``load_pretext_model``, ``export_run``).
"""

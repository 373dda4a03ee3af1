"""The model card (``README.md``) of a saved encoder: what its files record, in words.

:func:`model_card` writes a Hugging Face model card (a YAML header read by the Hub,
then Markdown) from an encoder and, when there is one, its pretraining run: the run's
``config.json``, history and status. It imports nothing else from the package but the
encoder's settings (:mod:`~braindecode_pars.models.encoder_config`), so that
:meth:`PatchEncoder.generate_model_card <braindecode_pars.PatchEncoder>` (the card
``save_pretrained`` writes) and :mod:`braindecode_pars.hub.folders` (the card of an exported
run) share it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import secrets
import shlex
from importlib import metadata

import numpy as np

from braindecode_pars._util.checks import InvalidParameterError
from braindecode_pars.models.encoder_config import _ACTIVATIONS

#: Tags of every model card the package writes.
_CARD_TAGS = ("eeg", "self-supervised", "pars", "braindecode")

#: The pretext tasks' names as the paper writes them.
_METHOD_NAMES = {"pars": "PARS", "mae": "MAE", "mp3": "MP3", "droppos": "DropPos"}

#: What each pretext task asks of the encoder, for the model card.
_PRETEXT_TASKS = {
    "pars": (
        "PARS (pairwise relative shift, Sandino et al. 2025): patches are drawn from a "
        "single-channel window, a share of them loses its positional embedding, and a pair "
        "decoder predicts the relative shift of every pair of position-masked patches "
        "from the encoder's tokens (mean squared error)"
    ),
    "mae": (
        "MAE (masked autoencoder): a share of the 1-s patches is removed and a small "
        "decoder reconstructs their samples from the encoder's tokens of the others"
    ),
    "mp3": (
        "MP3 (masked patch position prediction): shuffled patches without positional "
        "embedding, a share hidden from the attention; a linear head classifies the "
        "position of every patch"
    ),
    "droppos": (
        "DropPos: a share of the patches is removed and, of the visible ones, a share "
        "loses its positional embedding; a linear head classifies their positions"
    ),
}

#: The pretext settings a run records, with the words of the card.
_PRETEXT_SETTINGS = (
    ("n_patches", "patches per window"),
    ("pos_mask_ratio", "share of patches whose position is masked (gamma_pos)"),
    ("mask_ratio", "share of patches masked (gamma)"),
    ("sampling", "patch sampling"),
    ("decoder_name", "pair decoder"),
    ("decoder", "pair decoder"),
    ("decoder_heads", "pair decoder's attention heads"),
    ("decoder_hidden", "pair decoder's hidden size"),
    ("loss_on", "loss on"),
    ("label_sigma", "label smoothing (sigma, positions)"),
)


#: The command-line flags whose values are paths (``pretrain``'s, ``store``'s,
#: ``export``'s): an exported command holds a placeholder for each, ``<store>``, unless
#: the exporter names it (:func:`_public_command`).
_PATH_FLAGS = ("--store", "--out", "--config", "--run", "--recordings", "--braindecode-dataset")

#: The path flags that take several paths (``store --recordings a.edf b.edf``).
_MULTI_PATH_FLAGS = ("--recordings",)

#: The key of an exported record that holds the public names its exporter gave to its
#: paths (``{"store": "tuh-abnormal"}``), so that a second pass keeps them.
_NAMES_KEY = "public_names"

#: The end of the key of a run record's entries that stay on the machine: the salt of a
#: salted hash (``data.recordings_salt``, :func:`identifiers_hash`).
_LOCAL_SUFFIX = "_salt"


def identifiers_hash(identifiers, salt=None):
    """A short hash of a list of identifiers (recordings' names, subjects), for a run's
    record to tell datasets apart without naming anyone: the SHA-256 of the salt and
    the sorted list, its first 16 hexadecimal digits.

    A run salts its hash with a random salt of its own (``pretrain`` keeps it in the
    run's local ``config.json`` as ``data.recordings_salt`` and reuses it at every
    sitting; :func:`public_run_config` leaves it out), so that a published hash cannot
    be matched against guessed file names and subjects; two runs' hashes of the same
    recordings differ.

    Parameters
    ----------
    identifiers : iterable
        Anything with a ``str``; the order does not count.
    salt : str | None
        None: no salt (the hash of runs of earlier versions).

    Returns
    -------
    digest : str
    """
    names = sorted(str(i) for i in identifiers)
    text = json.dumps(names if salt is None else [str(salt), names])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: A placeholder of :func:`_placeholder`.
_PLACEHOLDER = re.compile(r"<[a-z-]+>")


def _placeholder(kind):
    """The word that stands for a path of ``kind`` (a flag's name): ``<store>``."""
    return f"<{kind}>"


def _public_names(names):
    """``names`` (``{kind: public name}``, kinds as :data:`_PATH_FLAGS` without dashes)
    checked: each a non-empty string that is not a path (no ``/`` or ``\\``)."""
    names = dict(names or {})
    kinds = sorted({f[2:] for f in _PATH_FLAGS} | {"path"})
    for kind, name in names.items():
        if kind not in kinds:
            raise InvalidParameterError(
                f"'names' may name {kinds}, but got {kind!r} (with {name!r})."
            )
        if not isinstance(name, str) or not name.strip() or re.search(r"[/\\]", name):
            raise InvalidParameterError(
                f"'names' gives {kind!r} the name {name!r}; a public name is a non-empty "
                "string without '/' or '\\' (a name, not a path)."
            )
    return names


def _public_path(value, kind="path", names=None):
    """What a card or an exported record says for a path of ``kind``: the name the
    exporter gave it (``names[kind]``), else a placeholder, ``<store>``, whatever the
    path: absolute or relative, a folder's last part too (per-patient folders,
    ``/data/stores/Zelinski_M``, name the patient)."""
    return (names or {}).get(kind) or _placeholder(kind)


def _is_absolute(value):
    """Whether a command-line word is an absolute path (POSIX, Windows, the home's)."""
    return bool(re.match(r"^(~|/|\\\\|[A-Za-z]:[/\\])", str(value)))


#: The extensions of the files a command may name (recordings, configurations, weights,
#: scripts).
_FILE_EXTENSIONS = (
    "edf", "bdf", "gdf", "fif", "set", "vhdr", "cnt", "mat", "json", "yaml", "yml", "toml",
    "txt", "csv", "tsv", "npy", "npz", "h5", "hdf5", "pt", "pth", "ckpt", "safetensors", "py",
    "sh",
)  # fmt: skip


def _is_path(word):
    """Whether a command-line word reads as a path: absolute, with a ``/``, or a file's
    name (``Zelinski_Margarethe_1962.edf``: an extension of :data:`_FILE_EXTENSIONS`)."""
    word = str(word)
    if _is_absolute(word) or "/" in word:
        return True
    return word.rpartition(".")[2].lower() in _FILE_EXTENSIONS and "." in word


def _public_command(command, names=None):
    """A recorded command line as it may leave the machine: every path in it a
    placeholder unless the exporter names it.

    The values of the path flags (:data:`_PATH_FLAGS`; all of ``--recordings``'s, as
    one) become ``<store>``, ``<out>``, ``<recordings>``...; any other word that reads
    as a path (absolute, with a ``/``, a file name with an extension) becomes
    ``<path>``. ``braindecode-pars pretrain --store /data/stores/Zelinski_M --out
    runs/mine`` becomes ``braindecode-pars pretrain --store <store> --out <out>``:
    folders and files often name a person, relative ones as much as absolute ones.
    ``names`` (``{"store": "tuh-abnormal"}``) gives the public name of a kind of path
    instead of its placeholder. The run's local ``config.json`` keeps the command as
    given.

    Parameters
    ----------
    command : str | None
    names : dict | None
        ``{kind: public name}``, a kind being a path flag without its dashes
        (``"store"``, ``"out"``, ``"recordings"``...) or ``"path"`` (any other path).

    Returns
    -------
    command : str | None
    """
    if command is None:
        return None
    try:
        parts = shlex.split(str(command))
    except ValueError:  # unbalanced quotes: every path-like word, as words
        parts = str(command).split()
    out, flag = [], None  # out: (word, prefix), the word quoted for the shell
    for part in parts:
        name, eq, value = part.partition("=")
        if part.startswith("-") and not re.match(r"^-\d", part):  # a flag
            flag = name if name in _PATH_FLAGS else None  # the path flag whose values follow
            if eq and (flag or _is_path(value)):
                part = (_public_path(value, flag[2:] if flag else "path", names), f"{name}=")
                flag = None
        elif flag:  # a path flag's value (each of --recordings's, said once)
            part = (_public_path(part, flag[2:], names), "")
            flag = flag if flag in _MULTI_PATH_FLAGS else None
            if out and out[-1] == part:
                continue
        elif _is_path(part):
            part = (_public_path(part, "path", names), "")
        elif _PLACEHOLDER.fullmatch(part):  # made public before
            part = (part, "")
        out.append(part)
    return " ".join(
        shlex.quote(part) if isinstance(part, str) else prefix + _shell_word(word)
        for part in out
        for word, prefix in [part if isinstance(part, tuple) else (part, "")]
    )


def _shell_word(word):
    """A public path's word in a command: a placeholder (``<store>``) as it is, for a
    reader to fill in; a name, quoted for the shell where it needs it."""
    return word if _PLACEHOLDER.fullmatch(word) else shlex.quote(word)


def listed_recordings(config):
    """Whether a run's record lists its recordings by name (``data.recordings``, as runs
    of versions before ``subject_from`` recorded them): what a card or an exported
    config must not hold.

    Parameters
    ----------
    config : dict
        A run's ``config.json`` (or an export's ``run_config.json``).

    Returns
    -------
    listed : bool
    """
    names = config.get("data.recordings")
    if not isinstance(names, list | tuple):
        return False
    return not (len(names) == 1 and str(names[0]).endswith("(bundled)"))


def public_run_config(config, names=None):
    """A run's record as it may leave the machine (an export's ``run_config.json``, the
    model card): its recordings counted, never named, and nothing local.

    - A list of recordings by name (``data.recordings`` of an earlier version) becomes
      ``data.n_recordings`` and ``data.recordings_hash`` (:func:`identifiers_hash`,
      salted with the record's ``data.recordings_salt``, else a new salt); the run's
      own records hold counts, the store's preprocessing and a salted hash of its
      recordings' files and subjects already.
    - The store (``data.store``) and every path of the command are placeholders
      (``<store>``, :func:`_public_command`) unless ``names`` names them, and the
      entries that stay on the machine (a key ending in ``_salt``) are left out. The
      names given are kept in the record (``public_names``), so that a record made
      public keeps them when made public again.

    Every other entry is kept.

    Parameters
    ----------
    config : dict
    names : dict | None
        The public names of the record's paths, ``{kind: name}``: a kind is a path flag
        without its dashes (``"store"``, ``"out"``, ``"config"``, ``"recordings"``...)
        or ``"path"``; a name is not a path (``{"store": "tuh-abnormal"}``). None: the
        names the record holds already, if any.

    Returns
    -------
    config : dict
        A new dict; ``run_info`` names the entries it holds.
    """
    out = dict(config)
    given = _public_names({**(out.get(_NAMES_KEY) or {}), **(names or {})})
    if given:
        out[_NAMES_KEY] = given
    recordings = out.get("data.recordings")
    info = out.get("run_info")
    if isinstance(recordings, list | tuple) and not listed_recordings(config):
        out["data.recordings"] = str(recordings[0])  # the bundled EEG, by its source
    elif listed_recordings(config):
        del out["data.recordings"]
        salt = out.get("data.recordings_salt") or secrets.token_hex(16)
        out.setdefault("data.n_recordings", len(recordings))
        out.setdefault("data.recordings_hash", identifiers_hash(recordings, salt))
        if isinstance(info, list):
            info = [*info, "data.n_recordings", "data.recordings_hash"]
    local = [key for key in out if key.endswith(_LOCAL_SUFFIX)]
    for key in local:
        del out[key]
    if isinstance(info, list):
        out["run_info"] = sorted({k for k in info if k != "data.recordings" and k not in local})
    if out.get("data.store") is not None:
        out["data.store"] = _public_path(out["data.store"], "store", given)
    if out.get("command") is not None:
        out["command"] = _public_command(out["command"], given)
    return out


def _package_version():
    """``braindecode-pars <version>`` as installed (the package's metadata)."""
    try:
        return f"braindecode-pars {metadata.version('braindecode-pars')}"
    except metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "braindecode-pars"


def _number(value):
    """A number as the card writes it: integers with thousands separators, floats short."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int) or float(value).is_integer() and abs(value) >= 1:
        return f"{int(value):,}"
    return f"{value:g}"


def _normalization_rows(encoder):
    """The card's rows of the encoder's input normalisation, and its line on the input."""
    mode = getattr(encoder, "normalization", "window")  # an encoder of before the setting
    rows = [("input normalisation (`normalization`)", f"`{mode}`")]
    if mode == "window":
        return rows, "any unit (per-window normalisation: the encoder never sees amplitude)"
    unit = encoder.unit
    if mode == "fixed":
        rows += [
            ("fixed scale (`amplitude_scale`)", f"{_number(encoder.amplitude_scale)} {unit}"),
            ("clip of the scaled input (`amplitude_clip`)", _number(encoder.amplitude_clip)),
        ]
        bound = encoder.amplitude_clip * encoder.amplitude_scale
        how = (
            f"each window minus its mean, divided by {_number(encoder.amplitude_scale)} "
            f"{unit} and clipped to +/- {_number(encoder.amplitude_clip)} (+/- "
            f"{_number(bound)} {unit})"
        )
    else:
        rows += [
            (f"mean log std of the corpus' windows (`log_std_mean`, ln {unit})",
             _number(encoder.log_std_mean)),
            ("its standard deviation (`log_std_std`)", _number(encoder.log_std_std)),
        ]  # fmt: skip
        how = "per-window normalisation plus a learned embedding of the window's log std"
    rows.append(("input unit (`unit`)", unit))
    return rows, (
        f"in {unit} only ({how}; windows whose standard deviation is outside the range of "
        f"EEG in {unit} are refused)"
    )


#: What the card says of the validation windows, by the run's recorded split.
_VALID_SPLIT = {
    "recordings": "The validation windows come from whole recordings that pretraining "
    "never trained on (held out by recording).",
    "groups": "The validation windows come from whole groups of recordings (the view's "
    "``split_groups``, such as subjects) that pretraining never trained on.",
    "windows": "The validation windows are a held-out share of the pretraining windows, "
    "split by window within recordings, not of other recordings.",
    None: "How the validation windows were split from the pretraining windows is not "
    "recorded (runs of versions before 0.1 split them by window within recordings).",
}


def _valid_split(history):
    """The ``valid_split`` the run recorded ("recordings", "groups", "windows"), or None."""
    for row in reversed(history or []):
        if row.get("valid_split") in ("recordings", "groups", "windows"):
            return row["valid_split"]
    return None


def _held_out(fraction, split):
    """What a run held out for validation, in words: ``valid_fraction`` is a target
    share, which a split by whole recordings (or groups) reaches only roughly
    (:func:`~braindecode_pars.pretraining._split.held_out_recordings` draws them until
    their windows make at least that share, and at most twice it)."""
    share = f"{_number(100 * fraction)} %"
    if split in ("recordings", "groups"):
        whole = "whole recordings" if split == "recordings" else "whole groups of recordings"
        return (
            f"{whole}, drawn at random until their windows made at least {share} of the "
            f"windows and at most twice that (`valid_fraction` {_number(fraction)})"
        )
    if split == "windows":
        return (
            f"{share} of the windows, drawn within the recordings (too few recordings to "
            "hold out whole ones)"
        )
    return (
        f"`valid_fraction` {_number(fraction)} (about {share} of the windows; whether as "
        "whole recordings or as windows within them is not recorded)"
    )


def _datasets(text):
    """The card's line on the named datasets of a run's ``data.datasets`` (``"name:
    what; ..."``), the recordings of no named dataset (``"?"``) said as such; None when
    no dataset is named."""
    parts = [part.strip() for part in str(text).split(";") if part.strip()]
    named = [part for part in parts if not part.startswith("?")]
    if not named:
        return None
    unnamed = [part.partition(":")[2].strip() for part in parts if part.startswith("?")]
    if unnamed and unnamed[0]:
        named.append(f"of no named dataset: {unnamed[0]}")
    return "; ".join(named)


def _skill_rows(history, key):
    """``[(epoch, skill)]`` of the epochs of ``history`` that recorded a finite ``key``."""
    rows = []
    for position, row in enumerate(history or ()):
        value = row.get(key)
        if isinstance(value, int | float) and math.isfinite(value):
            rows.append((int(row.get("epoch", position + 1)), float(value)))
    return rows


def _card_skill(history):
    """The card's section on the pretext skill the run reached."""
    lines = ["## Pretext skill", ""]
    lines.append(
        "Skill = 1 - loss / trivial loss, the trivial loss being that of a predictor that "
        "learned nothing, on the same batch and draws (for PARS: predicting no shift); "
        "0 means the encoder learned nothing, 1 a perfect answer."
    )
    lines.append("")
    valid, train = _skill_rows(history, "valid_skill"), _skill_rows(history, "train_skill")
    if not (valid or train):
        lines.append("- not recorded (the run's history holds no skill).")
        return lines
    key, rows = ("valid_skill", valid) if valid else ("train_skill", train)
    (last_epoch, last), (best_epoch, best) = rows[-1], max(rows, key=lambda r: r[1])
    if valid:
        lines.append(
            f"- held-out (validation) skill: **{last:.3f}** at the last epoch ({last_epoch}); "
            f"best {best:.3f} (epoch {best_epoch}). {_VALID_SPLIT[_valid_split(history)]}"
        )
    else:
        lines.append(
            f"- training skill (on the training batches: no windows were held out, so this "
            f"is not a held-out measure): {last:.3f} at the last epoch ({last_epoch}); best "
            f"{best:.3f} (epoch {best_epoch})."
        )
    picked = sorted({rows[int(round(i))] for i in np.linspace(0, len(rows) - 1, 5)})
    if (best_epoch, best) not in picked:
        picked = sorted([*picked, (best_epoch, best)])
    by_epoch = {int(row.get("epoch", i + 1)): row for i, row in enumerate(history)}
    columns = [("train_loss", "train loss"), ("valid_loss", "validation loss")]
    columns += [(f"{key.split('_')[0]}_trivial", "trivial loss")]
    columns = [(k, t) for k, t in columns if any(k in row for row in history)]
    skill_title = "validation skill" if key == "valid_skill" else "training skill"
    lines += ["", "| epoch | " + " | ".join(t for _, t in columns) + f" | {skill_title} |"]
    lines.append("|---" * (len(columns) + 2) + "|")
    for epoch, value in picked:
        row = by_epoch.get(epoch, {})
        cells = [f"{row[k]:.4f}" if isinstance(row.get(k), int | float) else "" for k, _ in columns]
        lines.append(f"| {epoch} | " + " | ".join(cells) + f" | {value:.3f} |")
    lines += ["", "Every epoch: `pretrain_history.json`."]
    return lines


def model_card(
    encoder,
    pretext_spec=None,
    run_config=None,
    history=None,
    status=None,
    command=None,
    license=None,
    name=None,
    overlap=None,
    names=None,
):
    """The ``README.md`` model card (Hugging Face format) of an encoder and its run.

    It states what is known and says what is not: the encoder's size and parameter
    count, its sampling rate and patch length; with ``pretext_spec`` or
    ``run_config``, the pretext task and its settings and the window length; with
    ``run_config`` (a run's ``config.json``), the data (``data.n_windows``,
    ``data.fingerprint``, and where a run records them the number of recordings,
    the people as the user grouped them, the datasets by the descriptions' ``dataset``
    and ``data.preprocessing``: counts, never a recording's or a person's name nor
    another description column, :func:`public_run_config`), the training budget and
    optimiser; with ``history``, the last and best held-out pretext skill
    (``valid_skill``; ``train_skill``, labelled as such, when nothing was held out);
    with ``status`` (:func:`~braindecode_pars.hub.folders.run_status`), whether the run
    finished; how to load the folder; and how to reproduce it (``command``, or
    ``run_config["command"]``, each of its paths a placeholder, ``<store>``, unless
    ``names`` names it).

    Parameters
    ----------
    encoder : PatchEncoder
    pretext_spec : dict | None
        The pretext model's constructor arguments and ``method`` (``pretext.json``).
    run_config : dict | None
        The run's settings (its ``config.json``, ``run_config.json`` of an export).
    history : list of dict | None
        The run's history, one dict per epoch (``pretrain_history.json``).
    status : dict | None
        ``{"epoch", "max_epochs", "finished"}``, as
        :func:`~braindecode_pars.hub.folders.run_status` returns it.
    command : str | None
        The command that made the run.
    license : str | None
        The licence of the weights (a Hugging Face licence identifier); None: not
        stated.
    name : str | None
        The model's name, the card's title (the folder's name); default
        ``"PatchEncoder"``.
    overlap : dict | None
        The overlap statistics of the pretext model's patch draws
        (:meth:`~braindecode_pars.PARS.overlap_statistics`), stated beside its settings.
    names : dict | None
        The public names of the run's paths (``{"store": "tuh-abnormal"}``,
        :func:`public_run_config`); None: those ``run_config`` holds, if any. A path
        not named is a placeholder: the store's line is left out, the command says
        ``<store>``.

    Returns
    -------
    card : str
        Markdown with a YAML header (``library_name: braindecode``, tags
        :data:`_CARD_TAGS`, ``license`` when given).

    Examples
    --------
    >>> from braindecode_pars import PatchEncoder
    >>> from braindecode_pars.models.card import model_card
    >>> encoder = PatchEncoder(sfreq=100, emb_dim=32, depth=1, n_heads=4, ff_dim=32)
    >>> card = model_card(encoder, name="tiny")
    >>> card.splitlines()[1]
    'library_name: braindecode'
    """
    from huggingface_hub import ModelCardData

    config = dict(run_config or {})
    spec = dict(pretext_spec or {})
    method = str(spec.get("method", config.get("model", ""))).lower() or None
    header = ModelCardData(library_name="braindecode", license=license, tags=list(_CARD_TAGS))
    n_params = sum(p.numel() for p in encoder.parameters())
    sfreq = float(encoder.sfreq)
    task = _PRETEXT_TASKS.get(method, method)
    lines = ["---", header.to_yaml(), "---", f"# {name or 'PatchEncoder'}", ""]
    pretrained = f" pretrained with {_METHOD_NAMES.get(method, method)}" if method else ""
    lines.append(
        f"A single-channel `PatchEncoder` ({_package_version()}){pretrained}. "
        "This card was written from the saved files: what they do not record is marked "
        "as not recorded."
    )
    lines += ["", "## Encoder", "", "| setting | value |", "|---|---|"]
    rows = [
        ("sampling rate", f"{_number(sfreq)} Hz"),
        ("patch length", f"{_number(encoder.patch_seconds)} s ({encoder.patch_size} samples)"),
        ("features (`emb_dim`)", _number(encoder.emb_dim)),
        ("transformer blocks (`depth`)", _number(encoder.depth)),
        ("attention heads (`n_heads`)", _number(encoder.n_heads)),
        ("feed-forward size (`ff_dim`)", _number(encoder.ff_dim)),
        ("activation", _ACTIVATIONS[encoder.activation].__name__),
        ("dropout (`drop_prob`)", _number(encoder.drop_prob)),
        ("flat-window floor of the normalisation (`eps`)", _number(encoder.eps)),
    ]
    normalization, input_unit = _normalization_rows(encoder)
    rows += [*normalization, ("parameters", _number(n_params))]
    lines += [f"| {k} | {v} |" for k, v in rows]
    n_times = config.get("n_times", spec.get("n_times"))
    lines += [
        "",
        f"Input: single-channel windows, shape (batch, 1, n_times), at {_number(sfreq)} Hz, "
        f"of any length of at least one patch; {input_unit}.",
    ]
    lines += ["", "## Pretext task", ""]
    if method:
        lines.append(f"{task}.")
        settings = {}  # label -> value, the first key that holds one
        for key, label in _PRETEXT_SETTINGS:
            value = spec.get(key, config.get(key))
            if value is not None:
                settings.setdefault(label, value)
        settings = list(settings.items())
        if n_times is not None:
            seconds = _number(n_times / sfreq)
            settings.insert(0, ("window length", f"{seconds} s ({_number(n_times)} samples)"))
        if overlap is not None:
            settings += _density_rows(overlap)
        if settings:
            lines += ["", "| setting | value |", "|---|---|"]
            lines += [f"| {t} | {v if isinstance(v, str) else _number(v)} |" for t, v in settings]
    else:
        lines.append("Not recorded (an encoder saved without its pretext task).")
    names = _public_names({**(config.get(_NAMES_KEY) or {}), **(names or {})})
    lines += _card_data(config, history, names) if run_config is not None else []
    lines += _card_training(config, status) if run_config is not None else []
    if run_config is None:
        lines += [
            "",
            "## Training",
            "",
            "Not recorded: this folder was written without its run. `braindecode-pars "
            "export` (`braindecode_pars.hub.export_run`) writes a card with the run's data, "
            "budget and skill.",
        ]
    if history is not None:
        lines += [""] + _card_skill(history)
    lines += _card_usage(sfreq, name, pretext=bool(spec))
    lines += ["", "## How to reproduce", ""]
    command = _public_command(command or config.get("command"), names)
    if command:
        lines += ["```bash", str(command), "```"]
        lines.append("")
        lines.append("The settings the run recorded are in `run_config.json`.")
    elif run_config is not None:
        lines.append(
            "The command that made this run is not recorded; its settings are in `run_config.json`."
        )
    else:
        lines.append("Not recorded.")
    lines += ["", "## Licence", ""]
    if license:
        lines.append(f"The weights: `{license}` (as stated by whoever exported them).")
    else:
        lines.append(
            "Not stated for the weights; the licences of the pretraining data may apply to "
            "them. The braindecode-pars code is BSD-3-Clause."
        )
    return "\n".join(lines) + "\n"


def _density_rows(overlap):
    """The card's rows on how densely PARS drew its patches: patch-seconds per second of
    crop and the overlap statistics of its draw (``overlap``,
    :meth:`~braindecode_pars.PARS.overlap_statistics`)."""
    return [
        ("patch-seconds per second of crop", f"{overlap['patch_seconds_per_second']:.2f} "
         "(the paper: 40 one-second patches in 30 s, 1.33)"),
        ("position-masked pairs that share samples", f"{100 * overlap['shared_pairs']:.1f} %"),
        ("crops whose patches chain end to end by shared samples",
         f"{100 * overlap['chained']:.1f} %"),
    ]  # fmt: skip


def _card_data(config, history=None, names=None):
    """The card's section on the pretraining data (``history``: how the run split its
    validation windows; ``names``: the public names of its paths)."""
    lines = ["", "## Data", ""]
    n_windows, fingerprint = config.get("data.n_windows"), config.get("data.fingerprint")
    if n_windows is not None:
        lines.append(f"- windows: {_number(n_windows)} (`data.n_windows`)")
    else:
        lines.append("- windows: not recorded")
    if fingerprint is not None:
        lines.append(
            f"- data fingerprint: `{fingerprint}` (`data.fingerprint`, "
            "`braindecode_pars.pretraining.resume.data_fingerprint`: a hash of the window "
            "index and the ends of every recording)"
        )
    else:
        lines.append("- data fingerprint: not recorded")
    config = public_run_config(config, names)  # counts, never names
    recordings = config.get("data.recordings", config.get("data.n_recordings"))
    if recordings is not None:
        lines.append(f"- recordings: {_number(recordings)}")
    else:
        lines.append("- recordings: not recorded")
    preprocessing = config.get("data.preprocessing", config.get("preprocessing"))
    if preprocessing is not None:
        text = preprocessing if isinstance(preprocessing, str) else json.dumps(preprocessing)
        lines.append(f"- preprocessing: {text}")
    else:
        lines.append("- preprocessing: not recorded")
    people = config.get("data.people")
    if people is not None:
        basis = config.get("data.people_counted_by")
        lines.append(f"- people: {_number(people)}" + (f" (counted by {basis})" if basis else ""))
    for key in sorted(config):
        if key == "data.datasets":  # the named ones; the line is left out when none is
            named = _datasets(config[key])
            if named:
                lines.append(f"- datasets: {named}")
        elif key == "data.store" and config[key] == _placeholder("store"):
            continue  # a store not named: nothing to say of it
        elif key.startswith("data.") and key not in (
            "data.n_windows", "data.fingerprint", "data.recordings", "data.preprocessing",
            "data.people", "data.people_counted_by", "data.n_recordings",
        ):  # fmt: skip
            lines.append(f"- {key[len('data.') :]}: {config[key]}")
    if config.get("n_times") is not None and config.get("sfreq"):
        seconds = _number(config["n_times"] / config["sfreq"])
        lines.append(
            f"- each example: one random EEG channel of a {seconds}-s crop "
            f"({_number(config['n_times'])} samples at {_number(config['sfreq'])} Hz)"
        )
    valid = config.get("valid_fraction")
    if valid:
        lines.append(f"- held out for validation: {_held_out(valid, _valid_split(history))}")
    elif "valid_fraction" in config:
        lines.append("- held out for validation: none")
    return lines


def _card_training(config, status):
    """The card's section on the training budget and whether the run finished."""
    lines = ["", "## Training", ""]
    max_epochs = config.get("max_epochs")
    if status is not None:
        done, budget = status.get("epoch"), status.get("max_epochs", max_epochs)
        of = f" of {_number(budget)}" if budget is not None else " (budget not recorded)"
        epochs = "epoch" if (budget if budget is not None else done) == 1 else "epochs"
        if status.get("finished"):
            lines.append(f"- status: **finished**, {_number(done)}{of} {epochs}")
        else:
            lines.append(
                f"- status: **unfinished**, {_number(done)}{of} {epochs} done; these are "
                "the weights of its last saved epoch, not of a finished run"
            )
    elif max_epochs is not None:
        lines.append(f"- epoch budget: {_number(max_epochs)} (epochs done: not recorded)")
    else:
        lines.append("- status and epoch budget: not recorded")
    optim = [
        ("optimiser", config.get("optimizer")),
        ("learning rate", config.get("lr")),
        ("weight decay", config.get("weight_decay")),
        ("batch size", config.get("batch_size")),
    ]
    for label, value in optim:
        shown = "not recorded" if value is None else _number(value)
        lines.append(f"- {label}: {shown}")
    warmup = config.get("warmup_fraction")
    if warmup is not None:
        lines.append(
            f"- schedule: linear warm-up over {_number(100 * warmup)} % of the epochs, "
            "then cosine to 0, stepped every batch"
        )
    return lines


def _card_usage(sfreq, name, pretext):
    """The card's section on loading the folder."""
    rate = _number(sfreq)
    lines = [
        "",
        "## How to load",
        "",
        "```python",
        "from braindecode_pars import PARSClassifier, PARSFineTuner, load_encoder",
        "",
        f'folder = "path/to/{name or "this-folder"}"  # this folder',
        f"encoder = load_encoder(folder)  # PatchEncoder, {rate} Hz",
        f"clf = PARSClassifier(encoder=folder, sfreq={rate})  # a probe over its features",
        f"tuned = PARSFineTuner(encoder=folder, sfreq={rate})  # or fine-tune it",
    ]
    if pretext:
        lines += [
            "",
            "from braindecode_pars.hub import load_pretext_model",
            "model = load_pretext_model(folder)  # the encoder with its pretext decoder",
        ]
    lines += [
        "```",
        "",
        f"The windows must be at {rate} Hz: resample others first "
        f"(`braindecode_pars.io.resample_windows(X, sfreq, {rate})`, "
        f'or braindecode\'s `Preprocessor("resample", sfreq={rate})` before windowing). '
        "`PatchEncoder.from_pretrained(folder)` (braindecode's loader) reads "
        "`config.json` and `model.safetensors` too.",
    ]
    return lines

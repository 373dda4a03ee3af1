"""The bundled PhysioNet-MI recordings the fixtures build their files from."""

from braindecode_pars.datasets import bundled_data_path


def bundled_s001_run(run):
    """The bundled EDF file of PhysioNet-MI subject 1's run ``run``, where MNE's eegbci
    loader keeps it (the package bundles runs 1 to 14 of subject 1)."""
    return bundled_data_path() / "MNE-eegbci-data/files/eegmmidb/1.0.0/S001" / f"S001R{run:02d}.edf"

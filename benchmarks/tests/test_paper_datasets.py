"""The paper's datasets and splits (``benchmarks/lib/paper_datasets.py``) on a small YSYW
layout (``ysyw_fixtures``)."""

import json
import shutil

from benchmarks.lib.paper_datasets import load_recipe
from braindecode_pars.datasets.ysyw import ysyw_split


def test_the_split_file_lies_in_the_data_folder_by_default(ysyw, tmp_path):
    root = tmp_path / "ysyw"
    shutil.copytree(ysyw[0], root)
    (root / "splits.json").unlink(missing_ok=True)
    split = ysyw_split(root)
    assert json.loads((root / "splits.json").read_text())["records"] == split
    assert load_recipe("ysyw", root)["test"].description.record.tolist() == split["test"]


def test_the_recipe_reads_every_record_once_through_the_cache(ysyw, tmp_path):
    root, _ = ysyw
    memory = load_recipe("ysyw", root)
    cached = load_recipe("ysyw", root, cache_dir=tmp_path / "cache")
    assert list(cached) == ["train", "valid", "test"]
    for part in memory:
        assert cached[part].description.record.tolist() == memory[part].description.record.tolist()
        assert cached[part].get_metadata().target.tolist() == (
            memory[part].get_metadata().target.tolist()
        )
    assert len(list((tmp_path / "cache").glob("[0-9]*"))) == 5  # every annotated record once

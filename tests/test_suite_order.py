"""The order pytest-xdist's workers take the test files in (tests/conftest.py): LONG_FILES names
files that exist, and reordering moves whole files without dropping, adding or reordering tests."""
import importlib.util
import os
import types

TESTS = os.path.dirname(os.path.abspath(__file__))
# the root conftest by its path: `import conftest` may find another directory's conftest.py
_spec = importlib.util.spec_from_file_location("tilecraft_tests_root_conftest", os.path.join(TESTS, "conftest.py"))
conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conftest)


def test_the_long_files_exist():
    missing = [f for f in conftest.LONG_FILES if not os.path.isfile(os.path.join(TESTS, *f.split("/")))]
    assert not missing, f"tests/conftest.py LONG_FILES names files that are gone: {missing}"


def test_reordering_moves_whole_files_longest_first():
    def item(path, name):
        return types.SimpleNamespace(path=os.path.join(TESTS, *path.split("/")), name=name)
    ray, fuzz = conftest.LONG_FILES[0], conftest.LONG_FILES[1]
    items = [item("ir/test_ir.py", "a"), item(fuzz, "f1"), item("cpu/test_gemm.py", "g1"), item(ray, "r1"),
             item("cpu/test_gemm.py", "g2"), item(fuzz, "f2"), item("ir/test_ir.py", "b")]
    before = list(items)
    conftest._longest_files_first(items)
    assert [i.name for i in items] == ["r1", "f1", "f2", "a", "b", "g1", "g2"]
    assert sorted(map(id, items)) == sorted(map(id, before))

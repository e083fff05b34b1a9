"""The README's Python example runs as written (the front door's code must not rot)."""
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_the_readmes_python_example_runs_as_written(capsys):
    blocks = re.findall(r"^```python\n(.*?)^```", README.read_text(), re.S | re.M)
    assert len(blocks) == 1, "README.md should hold one Python example"
    exec(compile(blocks[0], "README.md (Python example)", "exec"), {})
    printed = capsys.readouterr().out.split("\n")
    accuracy = float(printed[0].split()[0])
    assert accuracy > 0.9 and printed[0].endswith("(2, 10)")
    assert float(printed[1]) < 0.01  # the regression's last loss

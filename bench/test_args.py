"""The bench's command line (bench/run.py): every count it takes is at least 1, refused at
once rather than minutes into a section. No database."""

import pytest

from bench import run


@pytest.mark.parametrize(
    "argv",
    [
        ["--waits-reps", "0"],
        ["--waits-key-reps", "-1"],
        ["--waits-keys", "0"],
        ["--peer-workers", "1,0"],
        ["--peer-workers", ","],
        ["--growth-history=-1,10"],
    ],
)
def test_a_count_below_one_is_refused_at_once(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        run.parse_args(argv)
    assert exit_.value.code == 2
    assert f"{argv[0].split('=')[0]} must be at least " in capsys.readouterr().err


def test_counts_of_one_and_the_defaults_are_taken():
    args = run.parse_args(["--waits-reps", "1", "--peer-workers", "1,4"])
    assert args.waits_reps == 1 and args.peer_workers == [1, 4]
    assert args.waits_key_reps == 9 and run.parse_args(["--quick"]).waits_key_reps == 1
    assert run.parse_args(["--growth-history", "0,20000"]).growth_history == [0, 20000]

"""The benchmark harness's own judgement, where it is more than running things."""

from bench.server import not_durable


def test_a_postgres_log_figure_is_flagged_when_the_server_does_not_keep_commits():
    durable = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
    assert not_durable(durable) == []
    for flushed in ("local", "remote_write", "remote_apply"):  # the primary's flush waited
        assert not_durable({**durable, "synchronous_commit": flushed}) == []
    assert not_durable({**durable, "fsync": "off", "synchronous_commit": "off"}) == [
        "fsync=off", "synchronous_commit=off"]
    assert not_durable({**durable, "full_page_writes": "off"}) == ["full_page_writes=off"]

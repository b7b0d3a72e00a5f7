"""The Compare page's dashboards on a home with two finished experiments (AppTest)."""

from __future__ import annotations

import pytest

from .helpers import no_errors, run_small_experiments


@pytest.fixture(scope="module")
def experiments(app_home) -> list[str]:
    return run_small_experiments(app_home)


def test_compare_the_top_two_opens_the_side_by_side_comparison(app, experiments):
    at = app.switch_page("screens/compare.py").run()
    no_errors(at)
    at.selectbox(key="compare_experiment").set_value(experiments[0]).run()
    at.button(key="compare_top").click().run()
    no_errors(at)
    assert len([m for m in at.metric if m.label == "Fitness"]) == 2
    assert len(at.multiselect(key="compare_ids").value) == 2


def test_an_error_on_a_page_is_a_message_not_a_traceback(app, experiments, monkeypatch):
    import furnace.views.experiments as views

    def broken(*_args, **_kwargs):
        raise RuntimeError("the generations table is unreadable")

    monkeypatch.setattr(views, "generation_rows", broken)
    at = app.switch_page("screens/compare.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("the generations table is unreadable" in e.value for e in at.error), [e.value for e in at.error]
    monkeypatch.setenv("FURNACE_DEBUG", "1")
    at.run()
    assert at.exception  # with FURNACE_DEBUG the traceback reaches Streamlit

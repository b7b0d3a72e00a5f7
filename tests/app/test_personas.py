"""Persona editor: a save is a new version; validation errors sit next to the field and save nothing."""

from __future__ import annotations

from tests.conftest import LIBRARY_DIR

from .helpers import no_errors, store_for

PERSONA = "academic-editor"


def _select(at, persona_id: str):
    at.selectbox(key="persona_select").set_value(persona_id).run()
    no_errors(at)
    return at


def test_list_and_search(app):
    no_errors(app)
    expected = len(list(LIBRARY_DIR.glob("*.yaml")))
    assert f"{expected} persona(s)" in " ".join(c.value for c in app.caption)
    app.text_input(key="persona_query").input("tutor").run()
    assert "1 persona(s)" in " ".join(c.value for c in app.caption)


def test_edit_and_save_makes_a_new_version(app, app_home):
    store = store_for(app_home)
    before = store.get_elixir(PERSONA)
    at = _select(app, PERSONA)
    key = f"ed-{PERSONA}-{before.version}"
    at.text_area(key=f"{key}-identity").input("A meticulous academic editor who tightens every claim.").run()
    at.button(key="persona_save").click().run()
    no_errors(at)
    after = store.get_elixir(PERSONA)
    assert after.version == before.version + 1
    assert after.identity.startswith("A meticulous academic editor")
    success = " ".join(s.value for s in at.success)
    assert f"Saved {PERSONA} v{after.version}" in success and after.content_hash[:16] in success
    # in view: under the Save button (not above the form), and as a toast wherever the page is scrolled
    order = [(n.type, getattr(n, "key", None)) for n in _walk(at.main)]
    save_at = order.index(("button", "persona_save"))
    assert "success" in [t for t, _ in order[save_at:]] and "success" not in [t for t, _ in order[:save_at]]
    assert any(f"Saved {PERSONA} v{after.version}" in t.value for t in at.toast)


def test_validation_error_next_to_field_and_nothing_saved(app, app_home):
    store = store_for(app_home)
    before = store.get_elixir(PERSONA)
    at = _select(app, PERSONA)
    key = f"ed-{PERSONA}-{before.version}"
    at.text_area(key=f"{key}-expertise").input("").run()
    at.button(key="persona_save").click().run()
    assert not at.exception
    assert store.get_elixir(PERSONA).version == before.version
    messages = [e.value for e in at.error]
    assert any(m.startswith("Not saved") for m in messages)
    assert any("expertise" in m and not m.startswith("Not saved") for m in messages), messages
    assert not at.success


def test_history_shows_a_field_diff(app, app_home):
    store = store_for(app_home)  # a version of its own to diff against (whatever ran before in this home)
    current = store.get_elixir(PERSONA)
    store.save_elixir(current.model_copy(update={"identity": current.identity + " Cites sources first."}))
    at = _select(app, PERSONA)
    diffs = [c.value for c in at.code if c.language == "diff"]
    assert diffs and "identity" in diffs[0] and "Cites sources first." in diffs[0]


def test_create_a_new_persona_then_withdraw_it(app, app_home):
    store = store_for(app_home)
    at = _select(app, "+ New persona")
    at.text_input(key="ed-new-name").input("Tea Sommelier").run()
    at.text_area(key="ed-new-identity").input("A tea sommelier who pairs teas with food.").run()
    at.text_area(key="ed-new-expertise").input("tea\nfood pairing").run()
    at.text_area(key="ed-new-principles").input("Name the tea's origin first.").run()
    at.button(key="persona_save").click().run()
    no_errors(at)
    assert store.get_elixir("tea-sommelier").version == 1
    assert at.selectbox(key="persona_select").value == "tea-sommelier"  # the selector moved to the new persona
    at.checkbox(key="persona_confirm_delete").check().run()
    at.button(key="persona_delete").click().run()
    no_errors(at)
    assert store.get_elixir("tea-sommelier").withdrawn
    options = at.selectbox(key="persona_select").options
    assert options and not any("tea-sommelier" in o for o in options), options


def _walk(node):
    """Every element and block under ``node``, in page order."""
    for child in getattr(node, "children", {}).values():
        yield child
        yield from _walk(child)

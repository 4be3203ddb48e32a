"""Entity names: a safe alphabet, and unique without regard to case, so that no two tenants
look alike in `kgot entities list`."""

from __future__ import annotations

import threading

import pytest

from kgot.errors import EntityNameError, EntityNotFoundError, StoreError
from kgot.persistence import Store, open_store
from kgot.tests.persistence.test_persistence_cli import kgot  # noqa: F401  (fixture)


def test_names_that_look_alike_name_one_entity(store: Store) -> None:
    # `A`, `a`, Cyrillic `А` and fullwidth `Ａ` were four tenants listed side by side.
    store.create_entity("Acme Fund")
    with pytest.raises(StoreError) as taken:
        store.create_entity("acme fund")
    assert str(taken.value) == (
        "entity 'Acme Fund' already exists, and names are unique without regard to case (pick "
        "another name than 'acme fund', or use 'Acme Fund')"
    )
    with pytest.raises(EntityNameError, match=r"; did you mean 'Acme Fund2'\?$"):
        store.create_entity("Ａｃｍｅ Fund2")  # fullwidth
    with pytest.raises(EntityNameError, match=r"ASCII only: a letter of another script"):
        store.create_entity("Асme Fund3")  # Cyrillic А and с
    with pytest.raises(EntityNameError):
        store.create_entity("line\n")  # `$` used to accept a trailing line break
    assert [entity.name for entity in store.list_entities()] == ["Acme Fund"]
    with pytest.raises(EntityNotFoundError, match=r"did you mean 'Acme Fund'\?"):
        store.session("ACME FUND")


def test_concurrent_creations_differing_in_case_make_one_entity(store_url: str) -> None:
    stores = [open_store(store_url) for _ in range(2)]
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def create(store: Store, name: str) -> None:
        start.wait()
        try:
            store.create_entity(name)
            outcomes.append("created")
        except StoreError:
            outcomes.append("refused")

    threads = [
        threading.Thread(target=create, args=(store, name))
        for store, name in zip(stores, ("Tenant", "TENANT"), strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["created", "refused"]
    assert len(stores[0].list_entities()) == 1
    for store in stores:
        store.close()


@pytest.mark.slow
def test_a_bad_entity_name_is_one_line_and_exit_2(kgot) -> None:  # noqa: F811  (fixture)
    code, out, err = kgot("entities", "create", "Ａ")
    assert (code, out) == (2, "")
    assert err == (
        "kgot: error: invalid entity name 'Ａ': use ASCII letters, digits and . @ - _ (single "
        "spaces between words allowed), starting with a letter or digit, at most 128 "
        "characters; did you mean 'A'?\n"
    )
    assert kgot("entities", "create", "A")[0] == 0
    code, _, err = kgot("entities", "create", "a")
    assert code == 2 and err.count("\n") == 1 and "already exists" in err

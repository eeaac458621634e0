"""``/api/memories`` over a real socket: list, search, read and forget a bank's records.

The bank is a real :class:`MemoryBank` on a directory (the records are written before the
server starts, and read back through the bank after it forgot one); the server is the real
``create_app`` under uvicorn, with and without a token.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import Served, make_agent, start_server

from framework_agents.bank import MemoryBank, MemoryRecord
from framework_agents.errors import InvalidArgumentError
from framework_agents.server import create_app

TOKEN = "bank-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JANUARY = datetime(2026, 1, 1, tzinfo=UTC)


async def _fill(bank: MemoryBank) -> dict[str, MemoryRecord]:
    """Five records of ``user-1`` (one under ``user-1/trips``, one superseded) and a stranger's."""
    remember = bank.remember
    return {
        "tea": await remember(
            "Ada drinks green tea every morning", namespace=("user-1",), valid_from=JANUARY
        ),
        "old-city": await remember(
            "Ada lives in Lyon",
            namespace=("user-1",),
            key="city",
            valid_from=JANUARY + timedelta(days=1),
        ),
        "city": await remember(
            "Ada lives in Paris",
            namespace=("user-1",),
            key="city",
            valid_from=JANUARY + timedelta(days=30),
        ),
        "trip": await remember(
            "Ada flies to Oslo in March",
            namespace=("user-1", "trips"),
            kind="episode",
            valid_from=JANUARY + timedelta(days=2),
        ),
        "stranger": await remember(
            "Bob drinks black tea", namespace=("user-2",), valid_from=JANUARY + timedelta(days=3)
        ),
    }


@pytest.fixture
def bank(tmp_path: Path) -> Iterator[tuple[MemoryBank, dict[str, MemoryRecord]]]:
    """A directory bank holding :func:`_fill`'s records."""
    opened = MemoryBank(tmp_path / "bank")
    records = asyncio.run(_fill(opened))
    yield opened, records
    asyncio.run(opened.close())


@pytest.fixture
def served(tmp_path: Path, bank: tuple[MemoryBank, dict[str, MemoryRecord]]) -> Iterator[Served]:
    """The test agent with the bank, behind a token."""
    app = create_app(
        make_agent, store=str(tmp_path / "s"), token=TOKEN, console=False, bank=bank[0]
    )
    running = start_server(app)
    yield running
    running.stop()


def _client(served: Served, **headers: str) -> httpx.Client:
    return httpx.Client(base_url=served.url, headers={**AUTH, **headers}, timeout=30)


def _error(response: httpx.Response, status: int) -> str:
    """The error code of a refusal with ``status`` (and no stack trace in the body)."""
    assert response.status_code == status, response.text
    assert "Traceback" not in response.text
    code: str = response.json()["error"]["code"]
    return code


def test_a_namespace_lists_its_records_and_those_under_it_in_recording_order(
    served: Served, bank: tuple[MemoryBank, dict[str, MemoryRecord]]
) -> None:
    records = bank[1]
    with _client(served) as client:
        body = client.get("/api/memories", params={"namespace": "user-1"}).json()
    assert [r["id"] for r in body["records"]] == [
        records[name].id for name in ("tea", "old-city", "city", "trip")
    ]
    assert body["next_after"] is None
    assert body["records"][1] == records["old-city"].to_dict() | {
        "valid_to": records["city"].valid_from.isoformat()  # superseded by the new city
    }
    assert body["records"][0] == records["tea"].to_dict()


def test_a_listing_pages_with_limit_and_after_and_filters_kinds(
    served: Served, bank: tuple[MemoryBank, dict[str, MemoryRecord]]
) -> None:
    records = bank[1]
    seen: list[str] = []
    after: str | None = None
    with _client(served) as client:
        for expected_size in (3, 1):
            params: dict[str, Any] = {"namespace": "user-1", "limit": 3}
            if after:
                params["after"] = after
            page = client.get("/api/memories", params=params).json()
            assert len(page["records"]) == expected_size
            seen += [r["id"] for r in page["records"]]
            after = page["next_after"]
        assert after is None
        exact = client.get("/api/memories", params={"namespace": "user-1", "limit": 4}).json()
        assert exact["next_after"] is None  # a full last page says there is no more
        episodes = client.get(
            "/api/memories", params={"namespace": "user-1", "kinds": "episode"}
        ).json()
        both = client.get(
            "/api/memories", params=[("namespace", "user-1"), ("kinds", "episode,fact")]
        ).json()
    assert seen == [records[n].id for n in ("tea", "old-city", "city", "trip")]
    assert [r["id"] for r in episodes["records"]] == [records["trip"].id]
    assert len(both["records"]) == 4


def test_a_search_answers_hits_with_scores_for_the_namespace_only(
    served: Served, bank: tuple[MemoryBank, dict[str, MemoryRecord]]
) -> None:
    records = bank[1]
    with _client(served) as client:
        tea = client.get("/api/memories", params={"namespace": "user-1", "q": "tea"}).json()
        city = client.get("/api/memories", params={"namespace": "user-1", "q": "lives", "k": 8})
        past = client.get(
            "/api/memories",
            params={"namespace": "user-1", "q": "lives", "include_past": "true"},
        ).json()
        then = client.get(
            "/api/memories",
            params={
                "namespace": "user-1",
                "q": "lives",
                "as_of": (JANUARY + timedelta(days=5)).isoformat(),
            },
        ).json()
        one = client.get("/api/memories", params={"namespace": "user-1", "q": "Ada", "k": 1})
    assert [hit["record"]["id"] for hit in tea["hits"]] == [records["tea"].id]  # not Bob's
    assert tea["hits"][0]["record"] == records["tea"].to_dict()
    assert isinstance(tea["hits"][0]["score"], float) and tea["hits"][0]["score"] > 0
    assert [hit["record"]["id"] for hit in city.json()["hits"]] == [records["city"].id]
    assert {hit["record"]["id"] for hit in past["hits"]} == {
        records["city"].id,
        records["old-city"].id,
    }
    assert [hit["record"]["id"] for hit in then["hits"]] == [records["old-city"].id]
    assert len(one.json()["hits"]) == 1


def test_a_record_is_read_and_forgotten_by_id(
    served: Served, bank: tuple[MemoryBank, dict[str, MemoryRecord]]
) -> None:
    opened, records = bank
    trip = records["trip"]
    with _client(served) as client:
        assert client.get(f"/api/memories/{trip.id}").json() == trip.to_dict()
        assert client.delete(f"/api/memories/{trip.id}").status_code == 204
        assert _error(client.get(f"/api/memories/{trip.id}"), 404) == "MEMORY_NOT_FOUND"
        assert _error(client.delete(f"/api/memories/{trip.id}"), 404) == "MEMORY_NOT_FOUND"
        listed = client.get("/api/memories", params={"namespace": "user-1/trips"}).json()
        found = client.get("/api/memories", params={"namespace": "user-1", "q": "Oslo"}).json()
    assert listed == {"records": [], "next_after": None}
    assert found == {"hits": []}
    assert asyncio.run(opened.get(trip.id)) is None  # gone from the bank itself
    assert asyncio.run(opened.get(records["tea"].id)) == records["tea"]


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"namespace": ""},
        {"namespace": "a//b"},
        {"namespace": "/a"},
        {"namespace": "a/"},
        {"namespace": "/".join(["p"] * 9)},
        {"namespace": "x" * 257},
        {"namespace": "a\x00b"},
        {"namespace": "user-1", "q": "tea", "k": "0"},
        {"namespace": "user-1", "q": "tea", "k": "1001"},
        {"namespace": "user-1", "q": "tea", "k": "eight"},
        {"namespace": "user-1", "q": "tea", "include_past": "maybe"},
        {"namespace": "user-1", "q": "tea", "as_of": "yesterday"},
        {"namespace": "user-1", "q": "tea", "as_of": "2026-01-05T00:00:00"},
        {"namespace": "user-1", "limit": "0"},
        {"namespace": "user-1", "limit": "5000"},
        {"namespace": "user-1", "after": "not-a-record"},
    ],
    ids=[
        "no-namespace",
        "empty-namespace",
        "empty-middle-part",
        "leading-slash",
        "trailing-slash",
        "nine-parts",
        "part-too-long",
        "nul",
        "k-zero",
        "k-too-large",
        "k-not-a-number",
        "include-past-not-a-flag",
        "as-of-not-a-time",
        "as-of-naive",
        "limit-zero",
        "limit-too-large",
        "after-unknown",
    ],
)
def test_bad_input_is_400_invalid_argument(served: Served, params: dict[str, str]) -> None:
    with _client(served) as client:
        assert _error(client.get("/api/memories", params=params), 400) == "INVALID_ARGUMENT"


def test_an_overlong_record_id_is_400(served: Served) -> None:
    with _client(served) as client:
        assert _error(client.get(f"/api/memories/{'x' * 129}"), 400) == "INVALID_ARGUMENT"
        assert _error(client.delete(f"/api/memories/{'x' * 129}"), 400) == "INVALID_ARGUMENT"


def test_every_memory_route_needs_the_token(
    served: Served, bank: tuple[MemoryBank, dict[str, MemoryRecord]]
) -> None:
    opened, records = bank
    tea = records["tea"].id
    routes = [
        ("GET", "/api/memories?namespace=user-1"),
        ("GET", "/api/memories?namespace=user-1&q=tea"),
        ("GET", f"/api/memories/{tea}"),
        ("DELETE", f"/api/memories/{tea}"),
        ("GET", "/api/info"),
    ]
    with httpx.Client(base_url=served.url, timeout=30) as client:
        for header in (None, "Bearer wrong", f"Bearer {TOKEN}x"):
            headers = {"Authorization": header} if header else {}
            for method, path in routes:
                response = client.request(method, path, headers=headers)
                assert _error(response, 401) == "UNAUTHORIZED", (method, path, header)
                assert response.headers["www-authenticate"] == "Bearer"
    assert asyncio.run(opened.get(tea)) == records["tea"]  # nothing was forgotten


def test_the_site_guard_still_applies(
    served: Served, bank: tuple[MemoryBank, dict[str, MemoryRecord]]
) -> None:
    opened, records = bank
    tea = records["tea"].id
    with _client(served) as client:
        rebound = client.get("/api/memories?namespace=user-1", headers={"Host": "evil.example"})
        assert _error(rebound, 400) == "HOST_NOT_ALLOWED"
        foreign = client.delete(f"/api/memories/{tea}", headers={"Origin": "https://evil.example"})
        assert _error(foreign, 403) == "ORIGIN_NOT_ALLOWED"
        cross = client.delete(f"/api/memories/{tea}", headers={"Sec-Fetch-Site": "cross-site"})
        assert _error(cross, 403) == "ORIGIN_NOT_ALLOWED"
        own_page = client.delete(f"/api/memories/{tea}", headers={"Origin": served.url})
        assert own_page.status_code == 204
    assert asyncio.run(opened.get(tea)) is None


def test_info_says_whether_the_server_has_a_bank(tmp_path: Path, served: Served) -> None:
    with _client(served) as client:
        assert client.get("/api/info").json() == {"name": "framework-agents", "bank": True}
    plain = start_server(create_app(make_agent, store="memory:", console=False, name="plain"))
    try:
        with httpx.Client(base_url=plain.url, timeout=30) as client:
            assert client.get("/api/info").json() == {"name": "plain", "bank": False}
            for method, path in [
                ("GET", "/api/memories?namespace=user-1"),
                ("GET", "/api/memories/abc"),
                ("DELETE", "/api/memories/abc"),
            ]:
                response = client.request(method, path)
                assert _error(response, 404) == "NOT_FOUND"
                assert "no memory bank" in response.json()["error"]["message"]
    finally:
        plain.stop()


def test_a_bank_url_is_opened_and_served_by_the_app(tmp_path: Path) -> None:
    bank_dir = tmp_path / "bank"
    stored = asyncio.run(_remember_one(bank_dir))
    app = create_app(make_agent, store="memory:", console=False, bank=str(bank_dir))
    running = start_server(app)
    try:
        with httpx.Client(base_url=running.url, timeout=30) as client:
            listed = client.get("/api/memories", params={"namespace": "notes"}).json()
    finally:
        running.stop()
    assert listed["records"] == [stored.to_dict()]


async def _remember_one(where: Path) -> MemoryRecord:
    async with MemoryBank(where) as bank:
        return await bank.remember("water the plants", namespace=("notes",))


@pytest.mark.parametrize("bank", ["", 42, object()], ids=["empty", "int", "object"])
def test_create_app_refuses_what_is_not_a_bank(bank: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="bank must be"):
        create_app(make_agent, store="memory:", bank=bank)

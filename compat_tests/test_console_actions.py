"""The console's actions over HTTP, against a real `kcompat serve` with SCRAM users and ACLs on.

Login with the broker's SCRAM users or admin.console.token; a session cookie (HttpOnly,
SameSite=Strict) and the CSRF token each form carries (a POST without either: 403, nothing done);
actions go to the broker as Kafka requests under the user's principal, so the authorizer decides:
alice without rights is refused by Kafka's error name, admin creates, produces and deletes, and
confluent-kafka reads what the console produced. Every action is logged with its principal.
Topic configs, partitions, a group's offsets (reset with a dry run, deleted) and the group itself;
the message search (key, value, header, offset and time ranges); ACLs, SCRAM users, broker configs.
"""

from __future__ import annotations

import html
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.cookiejar import CookieJar
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from support import scram_broker

from kcompat.testing import TEST_DEFAULTS, Broker, free_port, wait_until

pytestmark = pytest.mark.timeout(180)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = {"admin": "admin-secret", "alice": "alice-secret"}
TOKEN = "console-token-3f9a"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("console-actions")
    props = {
        **TEST_DEFAULTS,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:admin;User:ANONYMOUS",
        "admin.listener": f"127.0.0.1:{free_port()}",
        "admin.console.token": TOKEN,
    }
    b = scram_broker(base, USERS, props)
    yield b
    b.stop()


class Browser:
    """urllib with a cookie jar: what a browser sends, minus the rendering."""

    def __init__(self, broker: Broker) -> None:
        assert broker.admin_url is not None
        self.base = broker.admin_url
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, path: str) -> tuple[int, str]:
        return self._open(urllib.request.Request(self.base + path))

    def post(self, path: str, fields: dict[str, str], **headers: str) -> tuple[int, str]:
        data = urllib.parse.urlencode(fields).encode()
        return self._open(urllib.request.Request(self.base + path, data=data, headers=headers, method="POST"))

    def _open(self, request: urllib.request.Request) -> tuple[int, str]:
        try:
            with self.opener.open(request, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def login(self, user: str, password: str) -> str:
        status, _ = self.post("/login", {"user": user, "password": password, "next": "/topics"})
        assert status == 200  # 303 followed to /topics
        return self.csrf()

    def csrf(self) -> str:
        status, page = self.get("/topics")
        assert status == 200
        found = re.search(r'name="csrf" value="([^"]+)"', page)
        assert found, "no CSRF token in the create form"
        return found.group(1)


def result(page: str) -> str:
    found = re.search(r'id="result">(.*?)</p>', page, re.DOTALL)
    assert found, page[:500]
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1)))


def test_login_session_cookie_and_csrf_refusals(broker: Broker) -> None:
    anon = Browser(broker)
    assert anon.get("/topics")[0] == 401  # SASL is on: a login (Basic or the session) first
    assert anon.get("/login")[0] == 200
    status, page = anon.post("/login", {"user": "alice", "password": "wrong"})
    assert status == 403 and "SASL_AUTHENTICATION_FAILED" in page
    # an action without a session: 403, and nothing created
    assert anon.post("/action/topic/create", {"name": "nosession", "partitions": "1"})[0] == 403

    admin = Browser(broker)
    csrf = admin.login("admin", "admin-secret")
    cookie = next(c for c in admin.jar if c.name == "kcompat_session")
    assert cookie.has_nonstandard_attr("HttpOnly") and cookie.get_nonstandard_attr("SameSite") == "Strict"
    # with the session but without (or with a wrong) CSRF token: 403
    assert admin.post("/action/topic/create", {"name": "nocsrf", "partitions": "1"})[0] == 403
    assert (
        admin.post("/action/topic/create", {"name": "nocsrf", "partitions": "1", "csrf": csrf + "x"})[0]
        == 403
    )
    # posted from another site's page, even with the token: 403
    fields = {"name": "nocsrf", "partitions": "1", "csrf": csrf}
    assert admin.post("/action/topic/create", fields, Origin="http://evil.example")[0] == 403
    assert "nocsrf" not in admin.get("/topics")[1] and "nosession" not in admin.get("/topics")[1]

    # logged out: the old cookie no longer acts
    admin.post("/logout", {})
    assert admin.post("/action/topic/create", fields)[0] == 403


def test_actions_go_through_the_authorizer(broker: Broker) -> None:
    admin = Browser(broker)
    csrf = admin.login("admin", "admin-secret")
    status, page = admin.post(
        "/action/topic/create",
        {"name": "console-made", "partitions": "3", "configs": "retention.ms=3600000", "csrf": csrf},
    )
    assert status == 200, page
    assert result(page) == "created topic console-made with 3 partition(s)"
    topic_page = admin.get("/topic?name=console-made")[1]
    assert "retention.ms" in topic_page and "3600000" in topic_page
    status, page = admin.post(
        "/action/topic/produce",
        {"name": "console-made", "partition": "1", "key": "k1", "value": "hello from the console",
         "headers": "trace=abc", "csrf": csrf},
    )  # fmt: skip
    assert status == 200 and result(page) == "written to console-made-1 at offset 0"
    consumer = Consumer({
        "bootstrap.servers": broker.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "admin", "sasl.password": "admin-secret",
        "group.id": "console-reader", "enable.auto.commit": False,
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition("console-made", 1, OFFSET_BEGINNING)])
        got: list[Any] = []
        wait_until(
            lambda: bool(m := consumer.poll(0.5)) and not m.error() and bool(got.append(m)) is False, 20
        )
        m = got[0]
        assert (m.key(), m.value(), m.headers()) == (b"k1", b"hello from the console", [("trace", b"abc")])
    finally:
        consumer.close()

    # alice has no ACLs: the broker's authorizer refuses her, by Kafka's error name
    alice = Browser(broker)
    csrf_a = alice.login("alice", "alice-secret")
    status, page = alice.post(
        "/action/topic/create", {"name": "alice-topic", "partitions": "1", "csrf": csrf_a}
    )
    assert status == 403 and result(page).startswith("TOPIC_AUTHORIZATION_FAILED")
    status, page = alice.post("/action/topic/produce", {"name": "console-made", "value": "x", "csrf": csrf_a})
    assert status == 403 and result(page).startswith("TOPIC_AUTHORIZATION_FAILED")
    status, page = alice.post("/action/topic/delete", {"name": "console-made", "csrf": csrf_a})
    assert status == 403 and result(page).startswith("TOPIC_AUTHORIZATION_FAILED")

    # the token logs in as User:console, which has no rights either
    token = Browser(broker)
    csrf_t = token.login("", TOKEN)
    assert "User:console" in token.get("/topics")[1]
    status, page = token.post("/action/topic/delete", {"name": "console-made", "csrf": csrf_t})
    assert status == 403 and result(page).startswith("TOPIC_AUTHORIZATION_FAILED")

    status, page = admin.post("/action/topic/delete", {"name": "console-made", "csrf": csrf})
    assert status == 200 and result(page) == "deleted topic console-made"
    logs = broker.logs()
    assert "console /action/topic/create by User:admin from 127.0.0.1: NONE" in logs
    assert "console /action/topic/create by User:alice from 127.0.0.1: TOPIC_AUTHORIZATION_FAILED" in logs


def sasl(user: str) -> dict[str, Any]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": USERS[user]}  # fmt: skip


def committed(broker: Broker, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer(
        {"bootstrap.servers": broker.address("SASL_PLAINTEXT"), "group.id": group, **sasl("admin")}
    )
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        return [tp.offset for tp in got]
    finally:
        consumer.close()


def preview_rows(page: str) -> list[tuple[str, ...]]:
    table = page.split('id="preview"', 1)[1].split("</table>", 1)[0]
    rows = [
        tuple(re.findall(r"<td[^>]*>(.*?)</td>", row))
        for row in re.findall(r"<tr>(.*?)</tr>", table, re.DOTALL)
    ]
    return [row for row in rows if row]  # the header row has no <td>


def test_topic_edits_and_group_offsets(broker: Broker) -> None:
    admin = Browser(broker)
    csrf = admin.login("admin", "admin-secret")
    post = lambda path, **f: admin.post(path, {**f, "csrf": csrf})  # noqa: E731
    assert post("/action/topic/create", name="offsets-t", partitions="2")[0] == 200
    status, page = post(
        "/action/topic/configs", name="offsets-t", set="retention.ms=7200000\nmax.message.bytes=65536"
    )
    assert status == 200 and result(page) == "changed 2 config(s) of topic offsets-t", page
    assert (
        'class="override"><td>max.message.bytes</td><td>65536</td>' in admin.get("/topic?name=offsets-t")[1]
    )
    status, page = post("/action/topic/configs", name="offsets-t", delete="max.message.bytes")
    assert status == 200 and "65536" not in admin.get("/topic?name=offsets-t")[1]
    status, page = post("/action/topic/partitions", name="offsets-t", count="1")
    assert status == 400 and result(page).startswith("INVALID_PARTITIONS")
    status, page = post("/action/topic/partitions", name="offsets-t", count="3")
    assert status == 200 and "3 partition(s)" in admin.get("/topic?name=offsets-t")[1]

    for i in range(6):  # two records a partition
        assert post("/action/topic/produce", name="offsets-t", partition=str(i % 3), value=f"v{i}")[0] == 200
    consumer = Consumer({"bootstrap.servers": broker.address("SASL_PLAINTEXT"), "group.id": "g-reset",
                         "enable.auto.commit": False, **sasl("admin")})  # fmt: skip
    consumer.assign([TopicPartition("offsets-t", p, OFFSET_BEGINNING) for p in range(3)])
    seen = 0
    deadline = 40
    while seen < 6 and deadline:
        m = consumer.poll(0.5)
        deadline -= 1
        seen += m is not None and not m.error()
    consumer.commit(asynchronous=False)
    consumer.close()
    assert committed(broker, "g-reset", "offsets-t", 3) == [2, 2, 2]

    # a dry run shows each partition's committed offset and its new one, and changes nothing
    status, page = post("/action/group/reset", id="g-reset", to="earliest", mode="preview")
    assert status == 200 and result(page).startswith("dry run: 3 partition(s)"), page
    assert preview_rows(page) == [("offsets-t", str(p), "2", "0") for p in range(3)]
    assert committed(broker, "g-reset", "offsets-t", 3) == [2, 2, 2]
    assert 'id="apply-reset"' in page
    status, page = post("/action/group/reset", id="g-reset", to="earliest", mode="apply")
    assert status == 200 and result(page) == "reset 3 partition(s) of group g-reset to earliest"
    assert committed(broker, "g-reset", "offsets-t", 3) == [0, 0, 0]
    status, page = post(
        "/action/group/reset", id="g-reset", topic="offsets-t", to="offset", value="1", mode="apply"
    )
    assert status == 200 and committed(broker, "g-reset", "offsets-t", 3) == [1, 1, 1]
    status, page = post("/action/group/reset", id="g-reset", to="offset", value="99", mode="preview")
    assert [r[3] for r in preview_rows(page)] == ["2", "2", "2"]  # kept within the log
    status, page = post(
        "/action/group/reset", id="g-reset", to="timestamp", value="99999999999999", mode="preview"
    )
    assert [r[3] for r in preview_rows(page)] == ["2", "2", "2"]  # no record after it: the log end
    status, page = post("/action/group/reset", id="g-reset", to="latest", mode="apply")
    assert status == 200 and committed(broker, "g-reset", "offsets-t", 3) == [2, 2, 2]

    # alice may not touch the group: the authorizer says so by name
    alice = Browser(broker)
    csrf_a = alice.login("alice", "alice-secret")
    status, page = alice.post(
        "/action/group/reset", {"id": "g-reset", "to": "earliest", "mode": "apply", "csrf": csrf_a}
    )
    assert status == 403 and result(page).split(":")[0].endswith("AUTHORIZATION_FAILED"), page
    status, page = alice.post("/action/group/delete", {"id": "g-reset", "csrf": csrf_a})
    assert status == 403 and result(page).startswith("GROUP_AUTHORIZATION_FAILED")

    status, page = post("/action/group/delete-offsets", id="g-reset", topic="offsets-t")
    assert status == 200 and result(page) == "deleted group g-reset's offsets on offsets-t", page
    assert committed(broker, "g-reset", "offsets-t", 3) == [-1001, -1001, -1001]
    status, page = post("/action/group/delete", id="g-reset")
    assert status == 200 and result(page) == "deleted group g-reset"
    status, page = post("/action/group/delete", id="g-reset")
    assert status == 400 and result(page).startswith("GROUP_ID_NOT_FOUND")


def records_shown(page: str) -> list[str]:
    return re.findall(r'<tr><td class="num">(\d+)</td>', page)


def test_search_and_security_views(broker: Broker) -> None:
    admin = Browser(broker)
    csrf = admin.login("admin", "admin-secret")
    assert admin.post("/action/topic/create", {"name": "search-t", "partitions": "1", "csrf": csrf})[0] == 200
    for i in range(10):
        fields = {"name": "search-t", "key": f"user-{i % 3}", "value": f'{{"n": {i}}}', "csrf": csrf,
                  "headers": "color=red" if i % 2 else "color=blue"}  # fmt: skip
        assert admin.post("/action/topic/produce", fields)[0] == 200
    topic_page = admin.get("/topic?name=search-t")[1]
    for name in ("key", "value", "header", "until", "until_ts"):
        assert f'name="{name}"' in topic_page  # the search form's fields

    def search(**q: str) -> list[str]:
        status, page = admin.get("/topic/messages?" + urllib.parse.urlencode({"name": "search-t", **q}))
        assert status == 200, page
        return records_shown(page)

    assert search() == [str(i) for i in range(10)]
    assert search(key="user-1") == ["1", "4", "7"]
    assert search(value='"n": 7') == ["7"]
    assert search(header="red") == ["1", "3", "5", "7", "9"]
    assert search(header="red", key="user-0") == ["3", "9"]
    assert search(offset="2", until="5") == ["2", "3", "4", "5"]
    assert search(header="red", limit="2") == ["1", "3"]
    page = admin.get("/topic/messages?name=search-t&header=red&limit=2")[1]
    assert "stopped before offset 4" in page
    stamps = [
        int(t) for t in re.findall(r'class="ts" title="(\d+)"', admin.get("/topic/messages?name=search-t")[1])
    ]
    assert search(timestamp=str(stamps[3]), until_ts=str(stamps[6])) == [
        str(i) for i in range(10) if stamps[3] <= stamps[i] <= stamps[6]
    ]
    assert search(key="nobody") == []

    # ACLs as kafka-acls lists them, the SCRAM users, the broker's configs (secrets hidden)
    client = AdminClient({"bootstrap.servers": broker.address("SASL_PLAINTEXT"), **sasl("admin")})
    binding = AclBinding(ResourceType.TOPIC, "search-", ResourcePatternType.PREFIXED, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip
    for f in client.create_acls([binding]).values():
        f.result(30)
    page = admin.get("/security")[1]
    assert (
        "<td>TOPIC</td><td>search-</td><td>PREFIXED</td><td>User:alice</td><td>*</td><td>READ</td><td>ALLOW</td>"
        in page
    )
    assert re.search(r"<td>alice</td><td>SCRAM-SHA-512 \(\d+\)</td>", page) and "<td>admin</td>" in page
    page = admin.get("/brokers")[1]
    assert "<td>admin.console.token</td><td>(sensitive)</td>" in page and TOKEN not in page
    assert "<td>authorizer.class.name</td>" in page
    # alice has no DESCRIBE (DESCRIBE_CONFIGS) on the cluster: no ACLs, users or broker configs
    alice = Browser(broker)
    alice.login("alice", "alice-secret")
    page = alice.get("/security")[1]
    assert (
        "CLUSTER_AUTHORIZATION_FAILED" in page and "User:alice</td>" not in page and 'id="users"' not in page
    )
    page = alice.get("/brokers")[1]
    assert 'id="configs-refused"' in page and "authorizer.class.name" not in page
    # with SASL on, the console's pages need a login too
    assert Browser(broker).get("/security")[0] == 401


def test_wrong_logins_are_limited(broker: Broker) -> None:
    """Last in this module: it leaves 127.0.0.1 locked out of the login for a minute."""
    guesser = Browser(broker)
    answers: list[int] = []
    while len(answers) < 11 and 429 not in answers:
        answers.append(guesser.post("/login", {"user": "admin", "password": f"guess-{len(answers)}"})[0])
    # ten wrong within a minute (the first test's one counts when run with it), then 429
    assert answers[-1] == 429 and set(answers[:-1]) == {403} and len(answers) in (10, 11)
    status, page = guesser.post("/login", {"user": "admin", "password": USERS["admin"]})
    assert status == 429 and "too many wrong logins" in page
    assert broker.logs().count("console login locked for 127.0.0.1: too many wrong logins") == 1

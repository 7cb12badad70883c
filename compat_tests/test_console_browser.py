"""The web console in a real browser: Debian's headless Chromium driven by Selenium, against a real
`kcompat serve` that confluent-kafka filled with records and a consumer group. Each page is loaded
and checked for what a person sees (the topic's records, a JSON value and a cut large one in the
message browser, the group's lag number and per-partition lag, the lag chart drawn); screenshots
are kept under the pytest basetemp (console-screenshots/)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.select import Select

from kcompat.testing import TEST_DEFAULTS, Broker, free_port

pytestmark = pytest.mark.timeout(180)


TOPIC = "orders"
GROUP = "billing"
PARTITIONS = 3
PER_PARTITION = 30
COMMITTED = {0: 30, 1: 12, 2: 0}  # so the lag is 0 + 18 + 30
BIG = 5000


def _chromium() -> tuple[str, str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.fail("chromium and chromium-driver are missing: run `bash tools/setup-test-deps.sh` (make test does)",
                    pytrace=False)  # fmt: skip
    return browser, driver


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.getbasetemp() / "console-screenshots"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("console")
    b = Broker(
        base / "data", base / "broker.log", {**TEST_DEFAULTS, "admin.listener": f"127.0.0.1:{free_port()}"}
    )
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def filled(broker: Broker) -> Iterator[Consumer]:
    """orders: 30 records a partition (JSON values, a key, a header; one value of 5000 bytes), and
    the group billing with one live member that committed COMMITTED."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            value = b"x" * BIG if (p, i) == (0, 1) else json.dumps({"order": i, "partition": p}).encode()
            producer.produce(
                TOPIC, value=value, key=f"k{i}".encode(), partition=p, headers=[("source", b"test")]
            )
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "client.id": "billing-app"})  # fmt: skip
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + 30
    while len(consumer.assignment()) < PARTITIONS and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert len(consumer.assignment()) == PARTITIONS
    consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()], asynchronous=False)
    yield consumer
    consumer.close()
    del producer, admin


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    binary, driver = _chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
    ):
        options.add_argument(arg)
    chrome = webdriver.Chrome(service=webdriver.ChromeService(executable_path=driver), options=options)
    yield chrome
    chrome.quit()


def wait_until(check: Callable[[], Any], what: str, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as e:  # the element is not there yet, or was just swapped by htmx
            last = e
        else:
            if last:
                return last
        time.sleep(0.1)
    raise AssertionError(f"{what}: still {last!r} after {timeout:.0f} s")


def cells(chrome: Any, table_id: str) -> list[list[str]]:
    rows = chrome.find_elements(By.CSS_SELECTOR, f"#{table_id} tbody tr")
    return [[td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in rows]


def test_overview_topics_and_brokers(broker: Broker, filled: Consumer, browser: Any, shots: Path) -> None:
    url = broker.admin_url
    browser.get(f"{url}/")
    assert browser.find_element(By.ID, "topic-count").text == "1"  # orders (__consumer_offsets is internal)
    assert browser.find_element(By.ID, "group-count").text == "1"
    browser.save_screenshot(str(shots / "overview.png"))

    browser.get(f"{url}/topics")
    rows = {r[0].split()[0]: r for r in cells(browser, "topics")}
    assert rows[TOPIC][1:3] == [str(PARTITIONS), str(PARTITIONS * PER_PARTITION)]
    assert "internal" in rows["__consumer_offsets"][0]
    assert not browser.find_elements(By.ID, "create-topic")  # actions need a login: a link says so
    assert (
        browser.find_element(By.CSS_SELECTOR, "#login-hint a")
        .get_attribute("href")
        .endswith("/login?next=/topics")
    )
    browser.save_screenshot(str(shots / "topics.png"))

    browser.get(f"{url}/brokers")
    assert cells(browser, "brokers")[0][:3] == ["1", "127.0.0.1", str(broker.port)]


def test_topic_page_and_message_browser(broker: Broker, filled: Consumer, browser: Any, shots: Path) -> None:
    browser.get(f"{broker.admin_url}/topic?name={TOPIC}")
    assert browser.find_element(By.ID, "topic-name").text == TOPIC
    assert [r[:4] for r in cells(browser, "partitions")] == [
        [str(p), "0", "30", "30"] for p in range(PARTITIONS)
    ]
    configs = {r[0]: r[1:] for r in cells(browser, "configs")}
    assert configs["cleanup.policy"] == ["delete", "DEFAULT_CONFIG"]

    form = browser.find_element(By.ID, "browse")
    form.find_element(By.NAME, "offset").send_keys("0")
    form.find_element(By.NAME, "limit").clear()
    form.find_element(By.NAME, "limit").send_keys("3")
    Select(form.find_element(By.NAME, "format")).select_by_visible_text("json")
    form.find_element(By.TAG_NAME, "button").click()
    rows = wait_until(lambda: cells(browser, "records"), "the browsed records")
    assert [r[0] for r in rows] == ["0", "1", "2"]
    assert rows[0][2] == "k0" and json.loads(rows[0][3]) == {"order": 0, "partition": 0}
    assert '\n  "order": 0' in rows[0][3]  # pretty-printed
    assert rows[1][3].endswith(f"… {BIG:,} bytes in all") and rows[1][3].startswith("x" * 100)
    assert rows[0][4] == "source: test"
    browser.save_screenshot(str(shots / "topic-messages.png"))

    # From the end: -2 gives the last two of the partition, shown as hex.
    form.find_element(By.NAME, "offset").clear()
    form.find_element(By.NAME, "offset").send_keys("-2")
    Select(form.find_element(By.NAME, "format")).select_by_visible_text("hex")
    form.find_element(By.TAG_NAME, "button").click()
    rows = wait_until(lambda: [r for r in cells(browser, "records") if r[0] == "28"] and cells(browser, "records"),
                      "the last two records")  # fmt: skip
    assert [r[0] for r in rows] == ["28", "29"] and rows[0][2] == b"k28".hex(" ")


def test_group_page_shows_lag_and_draws_its_chart(
    broker: Broker, filled: Consumer, browser: Any, shots: Path
) -> None:
    url = broker.admin_url
    expected = {p: PER_PARTITION - o for p, o in COMMITTED.items()}
    browser.get(f"{url}/groups")
    row = cells(browser, "groups")[0]
    assert row[0] == GROUP and row[1] == "classic" and row[3] == "1" and row[4] == str(sum(expected.values()))

    browser.get(f"{url}/group?id={GROUP}")
    assert browser.find_element(By.ID, "total-lag").text == str(sum(expected.values()))
    lag = {int(r[1]): r for r in cells(browser, "lag")}
    for p, o in COMMITTED.items():
        assert lag[p][2:6] == [str(o), "0", str(PER_PARTITION), str(expected[p])]
    members = cells(browser, "members")
    assert (
        len(members) == 1
        and members[0][1] == "billing-app"
        and members[0][3] == "orders-0, orders-1, orders-2"
    )
    chart = browser.find_element(By.ID, "lag-chart")
    wait_until(lambda: chart.get_attribute("data-drawn") == "true" and int(chart.get_attribute("data-points")) >= 2,
               "the lag chart with two samples")  # fmt: skip
    assert chart.find_elements(By.TAG_NAME, "canvas")
    assert chart.get_attribute("data-last") == str(sum(expected.values()))

    # More records: the lag table (htmx, every 2 s) and the chart follow without a reload.
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(10):
        producer.produce(TOPIC, value=b"{}", partition=1)
    assert producer.flush(30) == 0
    after = str(sum(expected.values()) + 10)
    wait_until(lambda: browser.find_element(By.ID, "total-lag").text == after, "the refreshed total lag")
    wait_until(
        lambda: browser.find_element(By.ID, "lag-chart").get_attribute("data-last") == after,
        "the chart's last point",
    )
    browser.save_screenshot(str(shots / "group.png"))


def test_an_emptied_group_with_six_digit_lag(broker: Broker, browser: Any, shots: Path) -> None:
    """A group whose member left shows "(consumer)", not "(consumer/)"; its lag of 120,000 draws a
    y axis wide enough for its tick labels, so the axis label does not overprint them."""
    topic, group, records = "backlog", "reporting", 120_000
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "queue.buffering.max.messages": 2 * records}
    )
    for _ in range(records):
        producer.produce(topic, value=b"r")
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    consumer.close()
    del producer, admin

    browser.get(f"{broker.admin_url}/group?id={group}")
    intro = browser.find_element(By.CSS_SELECTOR, "#group-state").find_element(By.XPATH, "..").text
    assert "(consumer)" in intro and "consumer/" not in intro, intro
    wait_until(lambda: browser.find_element(By.ID, "total-lag").text == str(records), "the total lag")
    chart = browser.find_element(By.ID, "lag-chart")
    wait_until(lambda: chart.get_attribute("data-last") == str(records), "the lag chart at 120000")
    ticks_of = 'return document.getElementById("lag-chart").chart.axes[1]._values'
    wait_until(lambda: "120,000" in (browser.execute_script(ticks_of) or []), "the tick at 120,000")
    widest, size, ticks, gap = browser.execute_script(
        """var u = document.getElementById("lag-chart").chart, ax = u.axes[1];
        u.ctx.font = ax.font[0];
        var w = Math.max.apply(null, ax._values.map(function (v) { return u.ctx.measureText(v).width; }));
        return [w / (window.devicePixelRatio || 1), ax._size, ax.ticks.size, ax.gap];"""
    )
    assert ticks + gap + widest <= size, (widest, size)
    browser.save_screenshot(str(shots / "group-six-digit-lag.png"))

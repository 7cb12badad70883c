"""The console's actions in a real browser: headless Chromium (Selenium) against a `kcompat serve`
with SCRAM users and ACLs on. admin logs in with the login form, creates a topic, produces a
message and finds it with the message search, previews a group's offset reset (dry run) and
applies it; alice, who has no ACLs, is refused by the broker's authorizer and the page names
TOPIC_AUTHORIZATION_FAILED. Screenshots under the pytest basetemp (console-screenshots/)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.select import Select
from support import scram_broker
from test_console_browser import _chromium, cells, wait_until

from kcompat.testing import TEST_DEFAULTS, Broker, free_port

pytestmark = pytest.mark.timeout(180)

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.getbasetemp() / "console-screenshots"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("console-acting")
    props = {
        **TEST_DEFAULTS,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "admin.listener": f"127.0.0.1:{free_port()}",
    }
    b = scram_broker(base, USERS, props)
    yield b
    b.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    """A fresh browser (no cookie) per test: each logs in as its own user."""
    binary, driver = _chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
    ):
        options.add_argument(arg)
    chrome = webdriver.Chrome(service=webdriver.ChromeService(executable_path=driver), options=options)
    yield chrome
    chrome.quit()


def login(chrome: Any, url: str, user: str, shots: Path | None = None) -> None:
    chrome.get(f"{url}/login?next=/topics")
    chrome.find_element(By.NAME, "user").send_keys(user)
    chrome.find_element(By.NAME, "password").send_keys(USERS[user])
    if shots is not None:
        chrome.save_screenshot(str(shots / "actions-login.png"))
    chrome.find_element(By.CSS_SELECTOR, "#login button").click()
    wait_until(lambda: chrome.find_element(By.ID, "principal").text == f"User:{user}", "logged in")


def fill(chrome: Any, form: str, **fields: str) -> None:
    for name, value in fields.items():
        element = chrome.find_element(By.CSS_SELECTOR, f"#{form} [name={name}]")
        if element.tag_name == "select":
            Select(element).select_by_visible_text(value)
        else:
            element.clear()
            element.send_keys(value)


def result(chrome: Any) -> str:
    return wait_until(lambda: chrome.find_element(By.ID, "result").text, "the action's result")


def test_admin_creates_produces_searches_and_resets(broker: Broker, browser: Any, shots: Path) -> None:
    url = broker.admin_url
    assert url is not None
    login(browser, url, "admin", shots)
    fill(browser, "create-topic", name="payments", partitions="2", configs="retention.ms=86400000")
    browser.save_screenshot(str(shots / "actions-create-topic.png"))
    browser.find_element(By.CSS_SELECTOR, "#create-topic button").click()
    assert result(browser) == "created topic payments with 2 partition(s)"
    browser.find_element(By.ID, "back").click()
    rows = {r[0]: r for r in cells(browser, "topics")}
    assert rows["payments"][1:3] == ["2", "0"]

    browser.get(f"{url}/topic?name=payments")
    fill(
        browser, "produce", partition="1", key="order-42", value='{"amount": 99.5}', headers="source=console"
    )
    browser.find_element(By.CSS_SELECTOR, "#produce button").click()
    assert result(browser) == "written to payments-1 at offset 0"
    browser.find_element(By.ID, "back").click()
    for i in range(5):  # some others to search among
        fill(browser, "produce", partition="1", key=f"order-{i}", value=f'{{"amount": {i}}}', headers="")
        browser.find_element(By.CSS_SELECTOR, "#produce button").click()
        result(browser)
        browser.find_element(By.ID, "back").click()
    fill(browser, "browse", partition="1", format="json", key="42")
    browser.find_element(By.CSS_SELECTOR, "#browse button").click()
    found = wait_until(lambda: cells(browser, "records") or None, "the search's records")
    assert len(found) == 1 and found[0][0] == "0" and found[0][2] == "order-42"
    assert '"amount": 99.5' in found[0][3] and found[0][4] == "source: console"
    browser.save_screenshot(str(shots / "actions-search.png"))
    browser.get(f"{url}/security")
    assert [r[0] for r in cells(browser, "users")] == ["admin", "alice"]
    browser.save_screenshot(str(shots / "actions-security.png"))

    # a group that has read everything, now stopped: preview a reset to earliest, then apply it
    consumer = Consumer({"bootstrap.servers": broker.address("SASL_PLAINTEXT"), "group.id": "ledger",
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
                         "sasl.username": "admin", "sasl.password": USERS["admin"]})  # fmt: skip
    consumer.commit(offsets=[TopicPartition("payments", 1, 6)], asynchronous=False)
    consumer.close()
    browser.get(f"{url}/group?id=ledger")
    assert [r[:3] for r in cells(browser, "lag")] == [["payments", "1", "6"]]
    fill(browser, "reset-offsets", topic="payments", to="earliest")
    browser.find_element(By.CSS_SELECTOR, "#reset-offsets button[value=preview]").click()
    assert result(browser) == "dry run: 2 partition(s) of group ledger would be reset to earliest"
    assert cells(browser, "preview") == [["payments", "0", "-", "0"], ["payments", "1", "6", "0"]]
    browser.save_screenshot(str(shots / "actions-reset-preview.png"))
    browser.find_element(By.CSS_SELECTOR, "#apply-reset button").click()
    assert result(browser) == "reset 2 partition(s) of group ledger to earliest"
    browser.find_element(By.ID, "back").click()
    wait_until(lambda: [r[:3] for r in cells(browser, "lag")] == [["payments", "0", "0"], ["payments", "1", "0"]],
               "the committed offsets reset")  # fmt: skip
    browser.save_screenshot(str(shots / "actions-reset-applied.png"))


def test_a_user_without_rights_is_refused(broker: Broker, browser: Any, shots: Path) -> None:
    url = broker.admin_url
    assert url is not None
    login(browser, url, "alice")
    fill(browser, "create-topic", name="alice-topic", partitions="1")
    browser.find_element(By.CSS_SELECTOR, "#create-topic button").click()
    said = result(browser)
    assert said.startswith("TOPIC_AUTHORIZATION_FAILED"), said
    assert browser.find_element(By.CSS_SELECTOR, "#result .error-name").text == "TOPIC_AUTHORIZATION_FAILED"
    browser.save_screenshot(str(shots / "actions-refused.png"))
    browser.get(f"{url}/topics")
    assert "alice-topic" not in [r[0] for r in cells(browser, "topics")]
    browser.get(f"{url}/security")  # DescribeAcls's right (DESCRIBE on the cluster): alice has none
    assert (
        browser.find_element(By.CSS_SELECTOR, "#refused .error-name").text == "CLUSTER_AUTHORIZATION_FAILED"
    )
    assert not browser.find_elements(By.ID, "users")
    browser.save_screenshot(str(shots / "actions-security-refused.png"))

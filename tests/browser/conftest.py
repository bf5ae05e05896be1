"""Fixtures of the browser tests: a real `manage.py serve` on the test database, passwords it can check, and Debian's
headless Chromium."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service

from deuz_project.database_url import database_url
from tests.browser.serving import ServeProcess
from tests.environment import PRODUCTION_ENV, clean_env

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


@pytest.fixture
def server_passwords(settings):
    """Hash the passwords users are made with as the server checks them: its hashers do not include the tests'
    fast MD5."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]


@pytest.fixture
def serve(transactional_db):
    """Start `manage.py serve ARGS` on this test's database, slow enough to reload mid-stream; returns its URL."""
    servers: list[ServeProcess] = []

    def start(*args: str, **env: str) -> str:
        environment = clean_env(DATABASE_URL=database_url(), DEUZ_DEMO_DELAY_MS="120", **PRODUCTION_ENV, **env)
        if os.environ.get("REDIS_URL"):
            environment["REDIS_URL"] = os.environ["REDIS_URL"]
        servers.append(ServeProcess(*args, env=environment))
        return servers[-1].url

    yield start
    for server in servers:  # before the database is flushed
        server.stop()


@pytest.fixture
def browser(tmp_path, monkeypatch):
    """Debian's headless Chromium; a machine without it fails here, saying what to install."""
    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager must never download a driver or a browser
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        pytest.fail(
            f"The browser tests need Debian's Chromium and its driver; missing: {', '.join(missing)}. "
            "Install them with `apt-get install -y chromium chromium-driver` (.ci/run does)."
        )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                     "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage",
                     "--window-size=1100,900", f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(argument)
    service = Service(executable_path=str(CHROMEDRIVER), log_output=str(tmp_path / "chromedriver.log"))
    try:
        driver = webdriver.Chrome(service=service, options=options)
    except WebDriverException as error:
        pytest.fail(f"Headless Chromium did not start ({CHROMIUM}, {CHROMEDRIVER}): {error.msg}")
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()

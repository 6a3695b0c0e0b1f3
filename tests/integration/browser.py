"""Debian's chromium, headless, driven by Selenium through chromium-driver: the browser the
console's tests use as a person would. Screenshots go to build/test-artifacts/<name>/ (or
$BROKER_ARTIFACTS/<name>/)."""
import os
import shutil
import time
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def artifacts(name: str) -> Path:
    root = Path(os.environ.get("BROKER_ARTIFACTS")
                or Path(__file__).resolve().parents[2] / "build" / "test-artifacts")
    out = root / name
    out.mkdir(parents=True, exist_ok=True)
    return out


def chromium(tmp_path: Path, width=1400, height=900):
    """A new headless chromium with its own profile in tmp_path; the caller quits it."""
    # Installed with the test packages (scripts/install-deps.sh): a missing one fails the test.
    assert shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER), \
        "chromium and chromium-driver are not installed (scripts/install-deps.sh)"
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", f"--user-data-dir={tmp_path / 'chromium'}",
                "--no-first-run", "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--disable-default-apps"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(CHROMEDRIVER, log_path=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(30)
    return driver


def wait_for(predicate, timeout=15.0, every=0.2, what="the condition"):
    """Polls predicate() until it returns something true; returns that, or fails naming `what`."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as e:  # an element replaced mid-read by the page's refresh
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")

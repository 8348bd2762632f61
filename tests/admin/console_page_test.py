#!/usr/bin/env python3
"""The console page driven by a real headless Chromium through Selenium (Debian chromium-driver and
python3-selenium), against the real delayd and the local stack: search jobs by prefix, open one,
cancel it, bulk-retry a filter of failed jobs after a dry run, open a job whose value is markup;
find the dead letters of a business and redrive them after a dry run. Every outcome is checked
through Kafka (kcat reads the ready and dead-letter topics) and Redis (delayctl get), never
through the page. Also: the read token's page hides every action; screenshots are PNGs.

    console_page_test.py <delayd> <delayctl> <output dir>     (needs KAFKA_BOOTSTRAP, REDIS_URL)
"""
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import delayd_env, free_port  # noqa: E402
from requires import missing_tool  # noqa: E402

TOKEN, READ_TOKEN = "page-test-token", "page-test-read-token"


def main():
    delayd, delayctl, out_dir = sys.argv[1:4]
    try:
        from selenium import webdriver
        from selenium.common.exceptions import NoAlertPresentException
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import Select, WebDriverWait
    except ImportError:
        # Debian's python3-selenium is installed for /usr/bin/python3; a python3 of its own earlier
        # on PATH (pyenv, a venv) cannot import it: run under Debian's then.
        if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
            os.execv("/usr/bin/python3", ["/usr/bin/python3", os.path.abspath(__file__), *sys.argv[1:]])
        return missing_tool("python3-selenium is not installed (Debian package python3-selenium)")
    for tool, package in (("chromedriver", "chromium-driver"), ("chromium", "chromium"), ("kcat", "kcat")):
        if not shutil.which(tool):
            return missing_tool(f"{tool} not found (Debian package {package})")
    bootstrap, redis_url = os.environ.get("KAFKA_BOOTSTRAP"), os.environ.get("REDIS_URL")
    if not bootstrap or not redis_url:
        print("FAIL: KAFKA_BOOTSTRAP and REDIS_URL must be set (scripts/stack.sh up; its env)")
        return 1

    run = f"page-{os.getpid()}-{int(time.time())}"
    port = free_port()
    env = delayd_env(run, bootstrap, redis_url)
    env.update({
        "DELAYD_KAFKA_STATUS_TOPIC": run + ".status",
        "DELAYD_ADMIN_LISTEN": f"127.0.0.1:{port}", "DELAYD_ADMIN_TOKEN": TOKEN, "DELAYD_ADMIN_READ_TOKEN": READ_TOKEN,
        # refunds keeps payloads too: a failed report for a business that keeps none fails the job at
        # once, without a dead letter (docs/consuming.md, "Job lifecycle").
        "DELAYD_SCHEDULER_BUSINESS": "orders.keep_payload=true,orders.max_process_attempts=1,"
                                     "refunds.keep_payload=true,refunds.max_process_attempts=1",
    })
    ready_topic, refunds_topic, dlq_topic = run + ".ready.orders", run + ".ready.refunds", run + ".dlq"

    def ctl(*args):
        return subprocess.run([delayctl, *args], env=env, capture_output=True, text=True, timeout=60)

    def state(job):
        r = ctl("get", job)
        return json.loads(r.stdout)["state"] if r.returncode == 0 else "missing"

    def wait(what, cond, seconds=60):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if cond():
                return
            time.sleep(0.2)
        raise AssertionError("timed out waiting for " + what)

    def records(topic):
        """Every record of the topic as (partition, offset, headers), as kcat reads them (Kafka, not
        the page). A topic not created yet has none."""
        r = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-e", "-o", "beginning", "-q",
                            "-f", "%p %o %h\n"], capture_output=True, text=True, timeout=60)
        recs = []
        for line in r.stdout.splitlines():
            if line:
                partition, offset, heads = (line.split(" ", 2) + [""])[:3]
                recs.append((int(partition), int(offset),
                             dict(kv.split("=", 1) for kv in heads.split(",") if "=" in kv)))
        return recs

    def headers(topic):
        return [h for _, _, h in records(topic)]

    log = open(os.path.join(out_dir, run + ".log"), "w")
    proc = subprocess.Popen([delayd], env=env, stdout=log, stderr=subprocess.STDOUT)
    driver = None
    try:
        def readyz():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                    return r.status == 200
            except Exception:  # noqa: BLE001 - not up yet
                return False
        wait("/readyz", readyz)
        for i in (1, 2, 3):
            for job, delay in ((f"pg-a-{i}", str(3_600_000 + i)), (f"pg-f-{i}", "0")):
                r = ctl("send", "--business", "orders", "--job-id", job, "--key", job, "--delay-ms", delay,
                        "--value", "value of " + job)
                assert r.returncode == 0, r.stderr
        refunds = [f"pg-d-{i}" for i in (1, 2, 3)]
        for job in refunds:
            r = ctl("send", "--business", "refunds", "--job-id", job, "--key", job, "--delay-ms", "300",
                    "--value", "value of " + job)
            assert r.returncode == 0, r.stderr
        markup = "<script>alert(1)</script>"
        assert ctl("send", "--business", "orders", "--job-id", "pg-x", "--key", "pg-x", "--delay-ms", "3600000",
                   "--value", markup).returncode == 0
        failed = [f"pg-f-{i}" for i in (1, 2, 3)]
        wait("the pg-f jobs delivered", lambda: all(state(j) == "ready" for j in failed))
        for job in failed:
            assert ctl("report", job, "failed", "--error", "the consumer broke").returncode == 0
        wait("the pg-f jobs failed", lambda: all(state(j) == "failed" for j in failed))
        # The refunds jobs out of attempts: each reported failed goes to the dead-letter topic.
        wait("the pg-d jobs delivered", lambda: all(state(j) == "ready" for j in refunds))
        for job in refunds:
            assert ctl("report", job, "failed", "--error", "refund service down").returncode == 0
        wait("the pg-d jobs failed", lambda: all(state(j) == "failed" for j in refunds))

        def dead_letter_rows():
            """The row id the page gives each refunds job's dead letter, from its place in the topic."""
            return {h["job-id"]: f"dl-row-{p}-{o}" for p, o, h in records(dlq_topic) if h.get("job-id") in refunds}
        wait("the pg-d jobs' dead letters (Kafka)", lambda: len(dead_letter_rows()) == 3)
        expected_dl_rows = sorted(dead_letter_rows().values())

        opts = webdriver.ChromeOptions()
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1800"):
            opts.add_argument(a)
        opts.binary_location = shutil.which("chromium")
        driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
        page = WebDriverWait(driver, 30)
        by_id = lambda i: driver.find_element(By.ID, i)  # noqa: E731
        driver.get(f"http://127.0.0.1:{port}/#token={TOKEN}")
        page.until(lambda d: by_id("access").text == "access: admin")

        # Search by prefix: the three waiting jobs, in due order.
        by_id("jobs-search").send_keys("pg-a-")
        by_id("jobs-go").click()
        rows = lambda: [tr.get_attribute("id") for tr in driver.find_elements(By.CSS_SELECTOR, "#jobs-table tr")]  # noqa: E731
        page.until(lambda d: len(rows()) == 3)
        assert rows() == ["job-row-pg-a-1", "job-row-pg-a-2", "job-row-pg-a-3"], rows()

        # Open one and cancel it (after the confirmation).
        driver.find_element(By.CSS_SELECTOR, "#job-row-pg-a-2 button").click()
        page.until(lambda d: '"job_id": "pg-a-2"' in by_id("drawer-record").text)
        by_id("act-cancel").click()
        page.until(lambda d: d.switch_to.alert).accept()
        page.until(lambda d: by_id("act-result").text.startswith("cancel: 200"))
        assert state("pg-a-2") == "cancelled", state("pg-a-2")
        assert [state(j) for j in ("pg-a-1", "pg-a-3")] == ["delay", "delay"]

        # A value that is markup shows as text and runs nothing.
        by_id("jobs-search").clear()
        by_id("jobs-search").send_keys("pg-x")
        by_id("jobs-go").click()
        page.until(lambda d: rows() == ["job-row-pg-x"])
        driver.find_element(By.CSS_SELECTOR, "#job-row-pg-x button").click()
        page.until(lambda d: '"job_id": "pg-x"' in by_id("drawer-record").text)
        assert markup in by_id("drawer-record").text
        try:
            driver.switch_to.alert
            raise AssertionError("the job's value ran as a script")
        except NoAlertPresentException:
            pass
        driver.save_screenshot(os.path.join(out_dir, "console-jobs.png"))

        # Bulk retry of the failed jobs: the dry run's count first, then the operation to its end.
        by_id("jobs-search").clear()
        by_id("jobs-search").send_keys("pg-f-")
        Select(by_id("jobs-state")).select_by_visible_text("failed")
        by_id("jobs-go").click()
        page.until(lambda d: len(rows()) == 3)
        Select(by_id("bulk-action")).select_by_visible_text("retry")
        by_id("bulk-dry").click()
        page.until(lambda d: "3 jobs would be acted on" in by_id("bulk-result").text)
        by_id("bulk-run").click()
        page.until(lambda d: d.switch_to.alert).accept()
        page.until(lambda d: by_id("bulk-result").get_attribute("data-status") == "done")
        assert "done 3" in by_id("bulk-result").text, by_id("bulk-result").text

        def second_delivery():
            recs = headers(ready_topic)
            return all(sorted(r.get("attempt") for r in recs if r.get("job-id") == j) == ["1", "2"] for j in failed)
        wait("each retried job's second ready record (Kafka)", second_delivery)
        assert not [r for r in headers(ready_topic) if r.get("job-id") in ("pg-a-2", "pg-x")]
        wait("the retried jobs ready again (Redis)", lambda: all(state(j) == "ready" for j in failed))

        # Dead letters: those of business refunds (not the orders jobs' ones), then their redrive
        # after a dry run, to its end.
        by_id("dl-business").send_keys("refunds")
        by_id("dl-go").click()
        dl_rows = lambda: sorted(tr.get_attribute("id")  # noqa: E731
                                 for tr in driver.find_elements(By.CSS_SELECTOR, "#dl-table tr"))
        page.until(lambda d: len(dl_rows()) == 3 or by_id("dl-note").text.startswith("GET "))  # or refused
        assert dl_rows() == expected_dl_rows, (dl_rows(), expected_dl_rows, by_id("dl-note").text)
        table = by_id("dl-table").text
        assert all(job in table for job in refunds) and "refund service down" in table, table
        driver.execute_script("arguments[0].scrollIntoView()", by_id("dl-panel"))
        driver.save_screenshot(os.path.join(out_dir, "console-dead-letters.png"))
        by_id("dl-dry").click()
        page.until(lambda d: by_id("dl-result").text.startswith("dry run: "))
        assert "3 dead letters would be redriven" in by_id("dl-result").text, by_id("dl-result").text
        by_id("dl-run").click()
        page.until(lambda d: d.switch_to.alert).accept()
        page.until(lambda d: by_id("dl-result").get_attribute("data-status") not in (None, "", "running", "stopping")
                   or not by_id("dl-result").text.startswith(("dry run: ", "operation ")))  # ended, or refused
        result = by_id("dl-result")
        assert result.get_attribute("data-status") == "done" and "done 3" in result.text, result.text

        def redriven():
            recs = headers(refunds_topic)
            return all(sorted(r.get("redrive-count", "") for r in recs if r.get("job-id") == j) == ["", "1"]
                       for j in refunds)
        wait("each redriven job's second ready record, with redrive-count 1 (Kafka)", redriven)
        wait("the redriven jobs ready again (Redis)", lambda: all(state(j) == "ready" for j in refunds))

        # The read token: the page hides every action.
        driver.get("about:blank")
        driver.get(f"http://127.0.0.1:{port}/#token={READ_TOKEN}")
        page.until(lambda d: by_id("access").text == "access: read")
        assert "read-only" in driver.find_element(By.TAG_NAME, "body").get_attribute("class")
        assert not by_id("bulk-dry").is_displayed()
        assert not by_id("act-cancel").is_displayed()
        assert by_id("dl-go").is_displayed()
        assert not by_id("dl-dry").is_displayed() and not by_id("dl-run").is_displayed()
        driver.save_screenshot(os.path.join(out_dir, "console-read-only.png"))
        for shot in ("console-jobs.png", "console-dead-letters.png", "console-read-only.png"):
            with open(os.path.join(out_dir, shot), "rb") as f:
                assert f.read(8) == b"\x89PNG\r\n\x1a\n", shot
        print(f"console page: prefix search 3 rows, cancel verified in Redis, markup shown as text, "
              "bulk retry of 3 failed jobs verified in Kafka (attempt 2 each) and Redis; 3 dead letters of "
              "refunds found, redriven after a dry run of 3, verified in Kafka (redrive-count 1 each) and Redis; "
              "read token: no actions")
        return 0
    finally:
        if driver is not None:
            driver.quit()
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


if __name__ == "__main__":
    sys.exit(main())

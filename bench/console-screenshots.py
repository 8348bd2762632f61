#!/usr/bin/env python3
"""Screenshots of the status page's Jobs and Dead letters views of a running delayd, for README
(bench/console-screenshots.sh runs it while delayd is under load). Headless Chromium through
Selenium (Debian chromium-driver and python3-selenium).

    console-screenshots.py --port P --business B --dl-business D --out DIR
"""
import argparse
import os
import shutil
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--business", required=True, help="the Jobs view's business filter")
    p.add_argument("--dl-business", required=True, help="the Dead letters view's business filter")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait
    except ImportError:
        if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
            os.execv("/usr/bin/python3", ["/usr/bin/python3", os.path.abspath(__file__), *sys.argv[1:]])
        print("python3-selenium is not installed (Debian package python3-selenium)", file=sys.stderr)
        return 1
    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,2400"):
        opts.add_argument(arg)
    opts.binary_location = shutil.which("chromium")
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    try:
        page = WebDriverWait(driver, 60)
        by_id = lambda i: driver.find_element(By.ID, i)  # noqa: E731
        driver.get(f"http://127.0.0.1:{a.port}/")
        page.until(lambda d: by_id("pending").text not in ("", "0", "-"))

        by_id("jobs-business").send_keys(a.business)
        by_id("jobs-go").click()
        page.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#jobs-table tr")) >= 10)
        driver.find_elements(By.CSS_SELECTOR, "#jobs-table tr button")[2].click()
        page.until(lambda d: '"job_id"' in by_id("drawer-record").text)
        by_id("jobs-panel").screenshot(os.path.join(a.out, "console-jobs.png"))

        by_id("dl-business").send_keys(a.dl_business)
        by_id("dl-go").click()
        page.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#dl-table tr")) >= 10)
        by_id("dl-dry").click()
        page.until(lambda d: "would be redriven" in by_id("dl-result").text)
        by_id("dl-panel").screenshot(os.path.join(a.out, "console-dead-letters.png"))
        print(f"screenshots: {a.out}/console-jobs.png, {a.out}/console-dead-letters.png")
        return 0
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())

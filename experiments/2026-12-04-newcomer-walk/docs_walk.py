"""Walk the built docs site in headless Chromium: every page loads without console
errors, every internal link resolves, no request leaves the machine (fonts), and the
search box finds a word."""
import http.server, threading, functools, json, sys
from urllib.parse import urljoin, urlparse
from playwright.sync_api import sync_playwright

SITE = sys.argv[1]
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=SITE)
httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
threading.Thread(target=httpd.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{httpd.server_address[1]}/"
out = {"pages": 0, "broken": [], "external_requests": set(), "console_errors": [], "search": None}
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
    page = browser.new_page(viewport={"width": 800, "height": 900})
    page.on("request", lambda r: out["external_requests"].add(urlparse(r.url).netloc) if not r.url.startswith(base) and not r.url.startswith("data:") else None)
    page.on("console", lambda m: out["console_errors"].append(m.text) if m.type == "error" else None)
    seen, todo = set(), [base]
    while todo:
        url = todo.pop()
        if url in seen: continue
        seen.add(url)
        resp = page.goto(url)
        if resp is None or resp.status >= 400:
            out["broken"].append(url); continue
        out["pages"] += 1
        for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))"):
            full = urljoin(url, href).split("#")[0]
            if full.startswith(base) and full not in seen:
                todo.append(full)
    page.goto(base)
    page.keyboard.press("/")  # Material: focus search
    page.fill("input.md-search__input", "duration")
    page.wait_for_timeout(1500)
    out["search"] = page.eval_on_selector_all(".md-search-result__item", "els => els.length")
    browser.close()
out["external_requests"] = sorted(out["external_requests"])
print(json.dumps(out, indent=1))

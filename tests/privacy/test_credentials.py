"""Every form a URL's credentials take (issue 44, item 5): listed, masked by a run's redactor and its final sweep."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

from compaction_lab.privacy import scrub
from compaction_lab.privacy.credentials import credentials_in, url_credentials
from compaction_lab.privacy.redactor import redactor

USER, PASSWORD = "lab@user", "Pa55/w0rd:Xyz"
URL = f"http://{quote(USER, safe='')}:{quote(PASSWORD, safe='')}@127.0.0.1:8080/v1"
BASIC = f"{USER}:{PASSWORD}".encode()


def test_url_credentials_lists_the_written_decoded_encoded_and_basic_forms():
    forms = url_credentials(f"see {URL} and nothing else")
    assert {PASSWORD, quote(PASSWORD, safe=""), f"{USER}:{PASSWORD}"} <= forms
    b64, safe = base64.b64encode(BASIC).decode(), base64.urlsafe_b64encode(BASIC).decode()
    assert {b64, b64.rstrip("="), safe, safe.rstrip("=")} <= forms
    assert url_credentials("http://127.0.0.1:8080/v1") == frozenset() and url_credentials("no url") == frozenset()
    token = url_credentials("https://ghtoken123456@example.com/r")  # a token as user name is the credential
    assert "ghtoken123456" in token and base64.b64encode(b"ghtoken123456:").decode() in token
    assert url_credentials("ssh://git@example.com/r") == frozenset()  # a user name alone, not http: no secret
    assert credentials_in({"model": {"base_url": URL}, "seeds": [1, 2]}) == url_credentials(URL)


def test_a_runs_redactor_masks_the_basic_header_an_endpoint_echoed_into_a_notebook(tmp_path: Path):
    """What the parent process writes (run.json's error, the final sweep of notebook 03) masks the base64 of the
    credentials of a URL in the run's parameters, though no URL is left to recognise it by."""
    echoed = f"ProviderError: 400 Incorrect API key provided: Basic {base64.b64encode(BASIC).decode()}"
    red = redactor(False, environ={}, parameters=[{"model": {"base_url": URL}}, {}])
    assert PASSWORD not in red.text(f"{echoed} {PASSWORD}") and "[REDACTED:" in red.text(echoed)
    nb = {"cells": [{"cell_type": "code", "outputs": [{"ename": "ProviderError", "evalue": echoed}]}]}
    (tmp_path / "03.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    (tmp_path / "03.html").write_text(f"<pre>{echoed}</pre>", encoding="utf-8")
    scrub.scrub_run_folder(tmp_path, red)
    for p in tmp_path.iterdir():
        assert base64.b64encode(BASIC) not in p.read_bytes(), p.name
    json.loads((tmp_path / "03.ipynb").read_text(encoding="utf-8"))  # still a notebook

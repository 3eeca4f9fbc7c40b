"""The CI template makes the safe thing the default: the cache key comes from a repository secret (issue 21 item 7)."""
import re
from pathlib import Path

from pytest_privleak.cache.manifest import HMAC_KEY_ENV

WORKFLOW = Path(__file__).resolve().parents[1] / "sample_project" / ".github" / "workflows" / "privacy.yml"


def test_the_template_sets_the_hmac_key_from_a_repository_secret_for_every_job():
    text = WORKFLOW.read_text(encoding="utf-8")
    workflow_env = text.split("\njobs:", 1)[0].split("\nenv:", 1)[1]  # the top-level env reaches every job
    assert re.search(rf"^  {HMAC_KEY_ENV}: \$\{{\{{ secrets\.{HMAC_KEY_ENV} \}}\}}$", workflow_env, re.M)
    assert "openssl rand -hex 32" in text.split("\nname:", 1)[0]  # the header says how to make the secret

"""testkit.doc_commands's `commands`, for tests/deploy/test_deploy_image.py, which imports it from
here until that file, edited by other work, imports it from testkit."""

from testkit.doc_commands import commands

__all__ = ["commands"]

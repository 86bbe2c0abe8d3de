#!/usr/bin/python3
"""Shared Key as Microsoft's Python SDK computes it, for test_azure_sign.c.

Usage: azure_sdk_sign.py ACCOUNT KEY METHOD BLOB QUERY [Header: value ...]

BLOB is the plain blob name in container "shards" ("" for the container
itself); the SDK's BlobClient encodes it into the URL path, as it would
send it. QUERY is the query as sent ("" for none). Prints three things:
the URL path, the Authorization value, then the string-to-sign (the rest
of the output), all from azure-storage-blob's SharedKeyCredentialPolicy.

Headers are handed to the SDK as the service receives them: the name in
lowercase and the value without surrounding blanks (HTTP drops them; the
Shared Key scheme lowercases names). The SDK itself would skip an x-ms-*
header whose name is not lowercase, and it never sends one.

Debian's python3-azure imports only under /usr/bin/python3.
"""
import sys

from azure.core.pipeline import PipelineContext, PipelineRequest
from azure.core.pipeline.transport import HttpRequest
from azure.storage.blob import BlobClient, ContainerClient
from azure.storage.blob._shared.authentication import SharedKeyCredentialPolicy

ENDPOINT = "http://127.0.0.1:10000/"


class Capture(SharedKeyCredentialPolicy):
    """The SDK's policy, keeping the string it signs."""

    string_to_sign = None

    def _add_authorization_header(self, request, string_to_sign):
        self.string_to_sign = string_to_sign
        super()._add_authorization_header(request, string_to_sign)


def main(argv):
    account, key, method, blob, query = argv[:5]
    headers = {}
    for line in argv[5:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    base = ENDPOINT + account
    if blob:
        url = BlobClient(base, "shards", blob).url
    else:
        url = ContainerClient(base, "shards").url
    if query:
        url += "?" + query
    policy = Capture(account, key)
    req = HttpRequest(method, url, headers=headers)
    policy.on_request(PipelineRequest(req, PipelineContext(None)))
    path = url[len(ENDPOINT) - 1:].partition("?")[0]
    sys.stdout.write("%s\n%s\n%s" % (path, req.headers["Authorization"],
                                     policy.string_to_sign))


if __name__ == "__main__":
    main(sys.argv[1:])

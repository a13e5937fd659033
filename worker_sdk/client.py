"""The REST API as Python calls (one method per endpoint the SDK uses)."""

from __future__ import annotations

import uuid

from .protocol import COMPLETE_PATH, EXTEND_PATH, Completion, TakeAnswer, TakeRequest, take_path
from .transport import Transport


class Client:
    """The server's API over a transport; ``WorkQueue(client=...)`` takes one (tests pass a fake transport)."""

    def __init__(self, transport: Transport):
        self.transport = transport

    def close(self) -> None:
        self.transport.close()

    def create_job(self, spec: dict) -> dict:
        return self.transport.request("POST", "/api/v1/jobs/", json=spec)

    def job(self, job_id: int) -> dict:
        return self.transport.request("GET", f"/api/v1/jobs/{job_id}/")

    def jobs(self, state: str | None = None, page: int = 1, page_size: int = 50) -> dict:
        """One page of jobs, newest first: ``{"count", "next", "previous", "results"}``."""
        params = {"page": page, "page_size": page_size, **({"state": state} if state else {})}
        return self.transport.request("GET", "/api/v1/jobs/", params=params)

    def job_action(self, job_id: int, action: str) -> dict:
        """pause, resume, cancel or retry-failed (an admin's)."""
        return self.transport.request("POST", f"/api/v1/jobs/{job_id}/{action}/")

    def items(self, job_id: int, filters: dict, cursor: str | None = None, page_size: int = 1000) -> dict:
        """One page of audit rows: ``{"next", "previous", "results"}`` (``next``: the following page's URL)."""
        params = {**filters, "page_size": page_size, **({"cursor": cursor} if cursor else {})}
        return self.transport.request("GET", f"/api/v1/jobs/{job_id}/items/", params=params)

    def items_csv(self, job_id: int, filters: dict) -> bytes:
        """The audit rows as the server's CSV export (every row that matches)."""
        return self.transport.request(
            "GET", f"/api/v1/jobs/{job_id}/items/", params={**filters, "format": "csv"}, raw=True
        )

    def take(self, job_id: int, request: TakeRequest) -> TakeAnswer:
        """Leases the next items of the job, completing the request's finished ones first (worker_sdk.protocol)."""
        # One key per take, reused by the transport's retries: a take whose
        # answer was lost is answered again, not given more items.
        key = uuid.uuid4().hex
        raw = self.transport.request(
            "POST", take_path(job_id), json=request.to_json(), idempotency_key=key, server_wait=request.wait
        )
        return TakeAnswer.from_json(raw)

    def resume_leases(self, job_id: int, worker: str) -> dict:
        """A restarted worker's own leases (held under ``worker`` by this token's user), back with new tokens."""
        return self.transport.request("POST", f"/api/v1/jobs/{job_id}/leases/resume/", json={"worker": worker})

    def complete(self, lease_id: int, token: int, records: int | None = None) -> dict:
        return self.transport.request(
            "POST", f"/api/v1/leases/{lease_id}/complete/", json={"token": token, "records": records}
        )

    def complete_many(self, completions: list[Completion]) -> dict:
        """Completes many leases in one request: ``{"completed": [ids], "lost": [ids]}`` (a lost one is no error)."""
        return self.transport.request("POST", COMPLETE_PATH, json={"leases": [c.to_json() for c in completions]})

    def fail(self, lease_id: int, token: int, error: str) -> dict:
        return self.transport.request(
            "POST", f"/api/v1/leases/{lease_id}/fail/", json={"token": token, "error": error[:8000]}
        )

    def release(self, lease_id: int, token: int, reason: str) -> dict:
        """Gives an item back unread, without using an attempt."""
        return self.transport.request(
            "POST", f"/api/v1/leases/{lease_id}/release/", json={"token": token, "reason": reason[:8000]}
        )

    def extend(
        self,
        leases: list[tuple[int, int]],
        waiting: bool | None = None,
        positions: list[int | None] | None = None,
        wait: float = 0.0,
        stall: dict | None = None,
        retry_pace: float | None = None,
        retry: bool = True,
        restartable: bool = False,
        started: list[bool] | None = None,
        returns: bool = False,
    ) -> dict:
        """A heartbeat; ``wait``: seconds the server may hold it until a split is asked of one of the leases.

        ``stall``: the holders' consumer's data stall, ``{"clock", "waited", "busy"}`` (worker_sdk.stall).
        ``retry_pace``: the longest wait between retries (the transport's);
        ``retry``: False, none (the caller sends a newer heartbeat instead).
        ``restartable``: the holders' restart takes their leases back (a
        dropped heartbeat does not give them back).
        ``started``: per lease, whether its consumer started it (taken ahead).
        ``returns``: the caller sends its next heartbeat within a second of
        this one's answer; the server awaits it, and gives the leases back
        when it does not come (worker_sdk.heartbeat).
        """
        refs = [{"id": lease_id, "token": token} for lease_id, token in leases]
        for ref, position in zip(refs, positions or ()):
            if position is not None:
                ref["position"] = position
        for ref, was_started in zip(refs, started or ()):
            if was_started:
                ref["started"] = True
        body = {"leases": refs}
        if waiting is not None:
            body["waiting"] = waiting
        if wait:
            body["wait"] = wait
        if stall is not None:
            body["stall"] = stall
        if restartable:
            body["restartable"] = True
        if returns:
            body["returns"] = True
        return self.transport.request(
            "POST", EXTEND_PATH, json=body, server_wait=wait, retry_pace=retry_pace, retry=retry
        )

    def split(self, lease_id: int, token: int, at: int) -> dict:
        return self.transport.request("POST", f"/api/v1/leases/{lease_id}/split/", json={"token": token, "at": at})

    def epoch_records(self, job_id: int, upto_epoch: int) -> dict:
        """Records per epoch, and unread in epochs up to ``upto_epoch`` (None when not known)."""
        return self.transport.request("GET", f"/api/v1/jobs/{job_id}/records/", params={"upto_epoch": upto_epoch})

    def watermarks(self, job_id: int) -> dict:
        return self.transport.request("GET", f"/api/v1/jobs/{job_id}/watermarks/")

    def snapshot(self, job_id: int, worker: str = "") -> dict:
        return self.transport.request("POST", f"/api/v1/jobs/{job_id}/snapshots/", json={"worker": worker})

    def restore(self, job_id: int, snapshot_id: int, worker: str = "", generation: str = "") -> dict:
        body = {"worker": worker, "generation": generation}
        return self.transport.request("POST", f"/api/v1/jobs/{job_id}/snapshots/{snapshot_id}/restore/", json=body)

    def item_history(self, job_id: int, item_id: int) -> dict:
        return self.transport.request("GET", f"/api/v1/jobs/{job_id}/items/{item_id}/history/")

    def tokens(self, state: str | None = None, user: str | None = None, page: int = 1, page_size: int = 50) -> dict:
        """One page of API tokens, newest first (an admin's; never a key)."""
        params = {"page": page, "page_size": page_size, **({"state": state} if state else {})}
        return self.transport.request("GET", "/api/v1/tokens/", params={**params, **({"user": user} if user else {})})

    def create_token(self, body: dict) -> dict:
        """A new API token (an admin's): ``{"user", "role", "name", "jobs", "expires_in_days"}``; the answer's
        ``key`` is shown this once."""
        return self.transport.request("POST", "/api/v1/tokens/", json=body)

    def revoke_token(self, token_id: int, current: bool = False) -> dict:
        """Revokes a token (an admin's); ``current`` to revoke the very token this client uses."""
        return self.transport.request("POST", f"/api/v1/tokens/{token_id}/revoke/", json={"current": current})

"""REST API views of the lease hot path: take, complete, fail, heartbeat, split. Parse, call a service, render.

Kept apart from the other views (api/views.py): these are the requests every
worker makes for every item, and the two that may wait (api/waits.py).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from ..errors import LeaseLost
from ..services import heartbeats
from ..services import leases as lease_service
from ..services import requests as request_service
from ..services import splits as split_service
from . import lease_serializers as s
from . import responses as r
from . import take_body, waits
from .permissions import caller_of, visible_job
from .views import ERROR, validated


class TakeView(APIView):
    @extend_schema(
        request=take_body.TakeSerializer,
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                description="One per take, the same on its retries: a repeat is answered with the first answer "
                "(the leases it made that are still held), or 503 request_in_progress with Retry-After while "
                "the first is still being answered. 1-64 of A-Z a-z 0-9 - _",
            )
        ],
        responses={200: r.TakeResponseSerializer, 400: ERROR, 404: ERROR, 409: ERROR, 503: ERROR},
        summary="Lease the next items (and complete earlier ones in the same request)",
    )
    def post(self, request, job_id: int):
        take = take_body.parse_take(request.data)
        caller = caller_of(request)
        results = []

        def run(key: str | None) -> lease_service.TakeResult:
            results.append(lease_service.take(job_id, take, key, caller))
            return results[-1]

        key = request.headers.get("Idempotency-Key")
        response = Response(request_service.answer_once(job_id, key, take.complete, run, _take_answer, caller))
        # A take that leaves is never held: its caller stops taking instead.
        if take.wait and not take.leave and results and results[-1].waitable:
            result = results[-1]
            wait = waits.Wait(
                take.wait,
                job_id,
                result.waiting_on or 0,
                result.wake_by,
                taker=take.worker,
                rerun=result.rerun,
                deferred=result.deferred,
            )
            waits.offer(request, response, wait)
        return response


def _take_answer(result: lease_service.TakeResult) -> dict:
    return result.answer().to_json()


class ResumeLeasesView(APIView):
    @extend_schema(
        request=s.ResumeLeasesSerializer,
        responses={200: r.ResumeLeasesResponseSerializer, 400: ERROR, 404: ERROR},
        summary="A restarted worker takes back its own leases at once (new tokens: the old process is fenced)",
    )
    def post(self, request, job_id: int):
        data = validated(s.ResumeLeasesSerializer, request.data).validated_data
        visible_job(request, job_id)
        leases = lease_service.resume(job_id, data["worker"], caller_of(request))
        return Response({"leases": [lease.to_json() for lease in leases]})


class CompleteView(APIView):
    @extend_schema(
        request=s.CompleteSerializer,
        responses={
            200: inline_serializer("Completed", {"id": serializers.IntegerField(), "state": serializers.CharField()}),
            409: ERROR,
        },
        summary="Complete a lease (repeating an accepted completion is fine)",
    )
    def post(self, request, lease_id: int):
        data = validated(s.CompleteSerializer, request.data).validated_data
        lease_service.complete(lease_id, data["token"], data["records"], caller_of(request))
        return Response({"id": lease_id, "state": "done"})


class CompleteManyView(APIView):
    @extend_schema(
        request=take_body.CompleteManySerializer,
        responses={200: r.CompleteManyResponseSerializer, 400: ERROR},
        operation_id="v1_leases_complete_many",
        summary="Complete many leases at once (the SDK's finished items that no take carries)",
    )
    def post(self, request):
        completions = take_body.parse_complete_many(request.data)
        completed, lost = lease_service.complete_many(completions, caller_of(request))
        return Response({"completed": completed, "lost": lost})


class FailView(APIView):
    @extend_schema(
        request=s.FailSerializer,
        responses={
            200: inline_serializer(
                "Failed",
                {
                    "id": serializers.IntegerField(),
                    "state": serializers.CharField(),
                    "attempts": serializers.IntegerField(),
                    "max_attempts": serializers.IntegerField(),
                },
            ),
            409: ERROR,
        },
        summary="Give an item back with an error: retried until max_attempts, then failed",
    )
    def post(self, request, lease_id: int):
        data = validated(s.FailSerializer, request.data).validated_data
        return Response(lease_service.fail(lease_id, data["token"], data["error"], caller_of(request)))


class ReleaseView(APIView):
    @extend_schema(
        request=s.ReleaseSerializer,
        responses={
            200: inline_serializer("Released", {"id": serializers.IntegerField(), "state": serializers.CharField()}),
            409: ERROR,
        },
        summary="Give an item back unread, without using an attempt (a synchronous rank's epoch stopped)",
    )
    def post(self, request, lease_id: int):
        data = validated(s.ReleaseSerializer, request.data).validated_data
        lease_service.release(lease_id, data["token"], data["reason"], caller_of(request))
        return Response({"id": lease_id, "state": "pending"})


class ExtendView(APIView):
    @extend_schema(
        request=s.TokenSerializer,
        responses={
            200: inline_serializer(
                "Extended", {"id": serializers.IntegerField(), "expires_at": serializers.DateTimeField()}
            ),
            409: ERROR,
        },
        summary="Heartbeat: push a lease's expiry forward by the job's lease timeout",
    )
    def post(self, request, lease_id: int):
        data = validated(s.TokenSerializer, request.data).validated_data
        beat = heartbeats.extend([(lease_id, data["token"])], caller=caller_of(request))
        if lease_id in beat.done:
            raise LeaseLost(f"lease {lease_id} was completed with this token: there is nothing left to extend")
        if lease_id not in beat.extended:
            raise LeaseLost(
                f"lease {lease_id} is not held with token {data['token']}: it expired and was taken back, or was never yours"
            )
        return Response({"id": lease_id, "expires_at": beat.extended[lease_id]})


class ExtendManyView(APIView):
    @extend_schema(
        request=s.ExtendManySerializer,
        responses={200: r.ExtendResponseSerializer},
        operation_id="v1_leases_extend_many",
        summary="Heartbeat for many leases at once (the SDK's heartbeat thread)",
    )
    def post(self, request):
        data = validated(s.ExtendManySerializer, request.data).validated_data
        refs = data["leases"]
        caller = caller_of(request)
        beat = heartbeats.extend(
            [(ref["id"], ref["token"]) for ref in refs],
            data["waiting"],
            [ref["position"] for ref in refs],
            caller,
            heartbeats.Stall(**data["stall"]) if data["stall"] else None,
            started=[ref["started"] for ref in refs],
        )
        response = Response(
            {
                "extended": {str(k): v for k, v in beat.extended.items()},
                "lost": beat.lost,
                "done": beat.done,
                "splits": {str(k): v for k, v in beat.splits.items()},
                "give_back": beat.give_back,
                "split_min_records": split_service.floor(),
                "heartbeat_in": beat.heartbeat_in,
            }
        )
        if data["wait"] and len(beat.jobs) == 1:
            # Held until a split or give-back is asked of a lease of these
            # holders; answered at once when one is, or a lease was lost.
            # While it waits, its connection says the holder lives: dropped
            # unanswered, the holders' leases expire; once answered, those it
            # extended expire unless the holders' next heartbeat comes soon,
            # when they said it would (returns: server/holders.py). Not a
            # restartable holder's: its restart takes them back.
            (job_id,) = beat.jobs
            told = beat.splits or beat.give_back or beat.lost
            wait = waits.Wait(
                # No longer than the pace the server wants positions at
                # (heartbeat_in): a held heartbeat carried the position from
                # when it left, and the split planner judged the holders of
                # a job's tail by reports up to 3 s old.
                0.0 if told else data["wait"] if beat.heartbeat_in is None else min(data["wait"], beat.heartbeat_in),
                job_id,
                holders=beat.holders,
                answer="heartbeat_in",
                caller=None if data["restartable"] else caller,
                extended=tuple(beat.extended.items()),
                returns=data["returns"],
                lease_timeout=beat.lease_timeout,
            )
            waits.offer(request, response, wait)
        return response


class SplitView(APIView):
    @extend_schema(
        request=s.SplitSerializer,
        responses={200: r.SplitResponseSerializer, 400: ERROR, 409: ERROR},
        summary="Answer a split asked of a lease: stop at a record, and the rest becomes a new item",
    )
    def post(self, request, lease_id: int):
        data = validated(s.SplitSerializer, request.data).validated_data
        return Response(split_service.cut(lease_id, data["token"], data["at"], caller_of(request)))

"""REST API views: parse, call a service or selector, render. Nothing else."""

from __future__ import annotations

import csv
from dataclasses import asdict

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import progress, selectors
from ..models import Job, JobState
from ..services import jobs as job_service
from ..services import retries as retry_service
from ..services import snapshots as snapshot_service
from . import csv_cells
from . import responses as r
from . import serializers as s
from .pagination import ItemCursorPagination
from .permissions import (
    check_may_create,
    check_may_replace,
    check_may_restore,
    visible_job,
    visible_jobs,
)

ERROR = inline_serializer(
    "Error",
    {
        "error": serializers.CharField(),
        "message": serializers.CharField(),
        "fields": serializers.DictField(required=False),
    },
)


def validated(serializer_class, data, **kwargs):
    serializer = serializer_class(data=data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return serializer


class JobListCreateView(generics.ListAPIView):
    serializer_class = r.JobSerializer

    def get_queryset(self):
        state = self.request.query_params.get("state")
        if state is not None and state not in JobState.values:
            raise serializers.ValidationError({"state": [f"unknown state; choose one of {', '.join(JobState.values)}"]})
        return visible_jobs(self.request, selectors.jobs(state)).select_related("created_by").with_warnings()

    @extend_schema(
        parameters=[OpenApiParameter("state", str, enum=JobState.values)],
        summary="List jobs, newest first",
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request=s.JobCreateSerializer,
        responses={201: r.JobSerializer, 200: r.JobSerializer, 400: ERROR, 409: ERROR},
        summary="Create a job, or attach to the job with the same name and spec",
        description=(
            "Idempotent by name and spec: every worker of a training run can call it and all get the "
            "same job (201 for the caller that created it, 200 for the others). The same name with a "
            "different spec is a 409 that names the differing fields."
        ),
    )
    def post(self, request):
        serializer = validated(s.JobCreateSerializer, request.data)
        spec, replaces = serializer.to_spec(), serializer.validated_data["replaces"]
        check_may_create(request, spec.name)
        if replaces is not None:
            check_may_replace(request, replaces, spec.name)
        job, created = job_service.create_or_attach(spec, request.user, replaces=replaces)
        return Response(r.JobSerializer(job).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class JobDetailView(APIView):
    @extend_schema(responses={200: r.JobSerializer, 404: ERROR}, summary="One job")
    def get(self, request, job_id: int):
        return Response(r.JobSerializer(visible_job(request, job_id)).data)


class _JobActionView(APIView):
    action = None

    @extend_schema(request=None, responses={200: r.JobSerializer, 404: ERROR, 409: ERROR})
    def post(self, request, job_id: int):
        visible_job(request, job_id)
        job = getattr(job_service, self.action)(job_id, request.user)
        return Response(r.JobSerializer(job).data)


class PauseJobView(_JobActionView):
    action = "pause"


class ResumeJobView(_JobActionView):
    action = "resume"


class CancelJobView(_JobActionView):
    action = "cancel"


class RetryFailedView(APIView):
    @extend_schema(
        request=None,
        responses={
            200: inline_serializer("RetryFailed", {"retried": serializers.IntegerField(), "job": r.JobSerializer()}),
            404: ERROR,
            409: ERROR,
        },
        summary="Put every failed item back to pending with fresh attempts (not for a cancelled or failed job)",
    )
    def post(self, request, job_id: int):
        visible_job(request, job_id)
        retried = retry_service.retry_failed(job_id, request.user)
        return Response({"retried": retried, "job": r.JobSerializer(job_service.get_job(job_id)).data})


class WatermarksView(APIView):
    @extend_schema(
        responses={200: r.WatermarksSerializer, 404: ERROR}, summary="Totals, per-epoch counts, rate and ETA"
    )
    def get(self, request, job_id: int):
        job = visible_job(request, job_id)
        return Response(r.WatermarksSerializer(progress.of(job).as_watermarks()).data)


class RecordsView(APIView):
    @extend_schema(
        parameters=[s.RecordsQuerySerializer],
        responses={200: r.RecordsSerializer, 400: ERROR, 404: ERROR},
        summary="Records per epoch, and unread in epochs up to one (synchronous training's step count)",
    )
    def get(self, request, job_id: int):
        upto = validated(s.RecordsQuerySerializer, request.query_params).validated_data["upto_epoch"]
        return Response(r.RecordsSerializer(selectors.epoch_records(visible_job(request, job_id), upto)).data)


class ItemsView(generics.ListAPIView):
    """Audit: items with their lease history fields; ``?format=csv`` streams everything that matches."""

    serializer_class = r.ItemSerializer
    pagination_class = ItemCursorPagination

    def _filters(self):
        # A plain dict: DRF reads an empty value in a QueryDict as absent (an
        # HTML form's habit), so `?format=` or `?epoch=` passed unnoticed.
        data = validated(s.ItemFilterSerializer, self.request.query_params.dict()).validated_data
        return {key: data.get(key) for key in ("state", "epoch", "worker")}

    def get_queryset(self):
        job = visible_job(self.request, self.kwargs["job_id"])
        return selectors.items(job, **self._filters())

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "state",
                str,
                enum=list(selectors.AUDIT_STATES),
                description="An item state, or completed (done or failed; the CSV lists them newest first)",
            ),
            OpenApiParameter("epoch", int),
            OpenApiParameter("worker", str, description="A worker name or its prefix"),
            OpenApiParameter("format", str, enum=["json", "csv"]),
        ],
        responses={200: r.ItemSerializer(many=True), (200, "text/csv"): OpenApiTypes.STR},
        summary="Audit items (filters: state, epoch, worker); ?format=csv streams the whole selection",
    )
    def get(self, request, job_id: int):
        filters = self._filters()
        if request.query_params.get("format") == "csv":
            job = visible_job(request, job_id)
            return _csv_response(job, filters)
        return super().get(request, job_id=job_id)


def _csv_response(job, filters) -> StreamingHttpResponse:
    selection = selectors.audit_selection(job, **filters).values_list(*selectors.AUDIT_COLUMNS)

    class Echo:
        def write(self, value):
            return value

    def rows():
        writer = csv.writer(Echo())
        yield writer.writerow(selectors.AUDIT_COLUMNS)
        # A server-side cursor: rows are fetched in chunks as the response
        # streams, so a million-item export never sits in memory.
        for row in selection.iterator(chunk_size=2000):
            yield writer.writerow(csv_cells.row(row))

    response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{job.name}-items.csv"'
    return response


class WorkersView(generics.ListAPIView):
    serializer_class = r.WorkerSerializer

    def get_queryset(self):
        job_id = self.request.query_params.get("job")
        if job_id is None:
            return selectors.workers().filter(job__in=visible_jobs(self.request, Job.objects.all()))
        # Digits only, in ASCII: str.isdigit() also takes '²', which int() refuses.
        if not (job_id.isascii() and job_id.isdigit()) or len(job_id) > 18:
            raise serializers.ValidationError({"job": ["expected a job id"]})
        return selectors.workers(visible_job(self.request, int(job_id)))

    @extend_schema(
        parameters=[OpenApiParameter("job", int)], summary="Workers seen, with items done and mean item time"
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class SnapshotCreateView(APIView):
    @extend_schema(
        request=s.SnapshotCreateSerializer,
        responses={201: r.SnapshotSerializer, 400: ERROR, 404: ERROR},
        summary="Snapshot the job's position (its newest completion); O(1), nothing is copied",
    )
    def post(self, request, job_id: int):
        data = validated(s.SnapshotCreateSerializer, request.data).validated_data
        visible_job(request, job_id)
        snapshot = snapshot_service.take(job_id, data["worker"])
        return Response(r.SnapshotSerializer(snapshot).data, status=status.HTTP_201_CREATED)


class SnapshotRestoreView(APIView):
    @extend_schema(
        request=s.RestoreSerializer,
        responses={200: r.RestoreResponseSerializer, 400: ERROR, 404: ERROR, 409: ERROR},
        summary="Restore a snapshot: items completed after it and live leases go back to pending",
        description=(
            "One transaction. Leases held now are fenced (their holders get 409). Repeating the job's last "
            "restore is a no-op answering the same restore (`repeated: true`) when nothing was completed since, "
            "or when `generation` equals that restore's."
        ),
    )
    def post(self, request, job_id: int, snapshot_id: int):
        data = validated(s.RestoreSerializer, request.data).validated_data
        check_may_restore(request, visible_job(request, job_id))
        result = snapshot_service.restore(job_id, snapshot_id, generation=data["generation"], worker=data["worker"])
        return Response(r.RestoreResponseSerializer(asdict(result)).data)


class ItemHistoryView(APIView):
    @extend_schema(
        responses={200: r.ItemHistorySerializer, 404: ERROR},
        summary="An item's history: completions and leases rolled back by restores, the restores, and its current lease",
    )
    def get(self, request, job_id: int, item_id: int):
        visible_job(request, job_id)
        return Response(r.ItemHistorySerializer(snapshot_service.item_history(job_id, item_id)).data)

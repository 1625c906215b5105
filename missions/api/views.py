"""The missions API: owner-only, session and CSRF on every write. validate → service → serialize.

Another owner's mission is a 404 on every route. Run now answers 202 with the started run, or
409 with the code of the skip (MISSION_ALREADY_ACTIVE, MISSION_DISABLED, TARGET_…) and the
skipped run, which is recorded like a skipped due run.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from garden.api.errors import FORBIDDEN, INVALID, not_found_response
from garden.errors import not_found
from missions import selectors
from missions.api.serializers import (
    MissionChangeInput,
    MissionCreateInput,
    MissionOutput,
    MissionRunOutput,
    MissionRunRefusedOutput,
)
from missions.models import Mission, MissionRun
from missions.services.missions import mission_create, mission_delete, mission_update
from missions.services.runs import mission_run_due

TAGS = ["missions"]
_NOT_FOUND = not_found_response("mission")


def _get_mission(request: Request, mission_id: int) -> Mission:
    mission = selectors.mission_get(owner=request.user, mission_id=mission_id)
    if mission is None:
        raise not_found("mission")
    return mission


def _mission_response(request: Request, mission_id: int, status_code: int = 200) -> Response:
    return Response(MissionOutput(_get_mission(request, mission_id)).data, status=status_code)


class MissionListCreateApi(APIView):
    @extend_schema(
        tags=TAGS,
        responses={200: MissionOutput(many=True), 403: FORBIDDEN},
        description="The owner's missions, each with its schedule and last run.",
    )
    def get(self, request: Request) -> Response:
        return Response(MissionOutput(selectors.mission_list(owner=request.user), many=True).data)

    @extend_schema(
        tags=TAGS,
        request=MissionCreateInput,
        responses={201: MissionOutput, 400: INVALID, 403: FORBIDDEN},
        description="Create a mission and its beat entry. The target is one of the "
        "owner's agents (not removed) or groups (neither deleted nor archived).",
    )
    def post(self, request: Request) -> Response:
        data = MissionCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        mission = mission_create(
            owner=request.user,
            name=v["name"],
            prompt=v["prompt"],
            target_type=v["target_type"],
            target_id=v["target_id"],
            schedule=v["schedule"],
            enabled=v["enabled"],
            origin_conversation_id=v["origin_conversation"],
        )
        return _mission_response(request, mission.pk, status.HTTP_201_CREATED)


class MissionDetailApi(APIView):
    @extend_schema(tags=TAGS, responses={200: MissionOutput, 403: FORBIDDEN, 404: _NOT_FOUND})
    def get(self, request: Request, mission_id: int) -> Response:
        return _mission_response(request, mission_id)

    @extend_schema(
        tags=TAGS,
        request=MissionChangeInput,
        responses={200: MissionOutput, 400: INVALID, 403: FORBIDDEN, 404: _NOT_FOUND},
        description="Change any part; a given schedule replaces the old one. "
        "Enabling checks the target again and clears disabled_reason.",
    )
    def patch(self, request: Request, mission_id: int) -> Response:
        mission = _get_mission(request, mission_id)
        data = MissionChangeInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = dict(data.validated_data)
        if "origin_conversation" in v:
            v["origin_conversation_id"] = v.pop("origin_conversation")
        mission_update(mission=mission, **v)
        return _mission_response(request, mission_id)

    @extend_schema(
        tags=TAGS,
        request=None,
        responses={204: None, 403: FORBIDDEN, 404: _NOT_FOUND},
        description="Delete the mission, its runs and its beat entry. Work a run "
        "already started (a group request) is not stopped.",
    )
    def delete(self, request: Request, mission_id: int) -> Response:
        mission_delete(mission=_get_mission(request, mission_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class MissionRunNowApi(APIView):
    @extend_schema(
        tags=TAGS,
        request=None,
        responses={
            202: MissionRunOutput,
            403: FORBIDDEN,
            404: _NOT_FOUND,
            409: OpenApiResponse(
                MissionRunRefusedOutput,
                description=(
                    "The run was recorded as skipped: MISSION_ALREADY_ACTIVE, MISSION_DISABLED, "
                    "TARGET_DELETED, TARGET_ARCHIVED, TARGET_REMOVED, TARGET_CANNOT_RUN, or the "
                    "request's own refusal (UNKNOWN_MEMBER, …)."
                ),
            ),
        },
        description="Run the mission now, through the same path as a due run.",
    )
    def post(self, request: Request, mission_id: int) -> Response:
        mission = _get_mission(request, mission_id)
        run = mission_run_due(mission_id=mission.pk, trigger=MissionRun.Trigger.MANUAL)
        if run is None:  # deleted in the meantime
            raise not_found("mission")
        if run.state == MissionRun.State.SKIPPED:
            error = {
                "field": "non_field_errors",
                "code": run.outcome_code,
                "message": run.skipped_reason,
            }
            refused = {
                "code": run.outcome_code,
                "message": run.skipped_reason,
                "errors": [error],
                "mission_run": run,
            }
            return Response(MissionRunRefusedOutput(refused).data, status=status.HTTP_409_CONFLICT)
        return Response(MissionRunOutput(run).data, status=status.HTTP_202_ACCEPTED)


class MissionRunListApi(APIView):
    @extend_schema(
        tags=TAGS,
        responses={200: MissionRunOutput(many=True), 403: FORBIDDEN, 404: _NOT_FOUND},
        description="The mission's latest runs (at most 50), newest first, skipped ones included.",
    )
    def get(self, request: Request, mission_id: int) -> Response:
        mission = _get_mission(request, mission_id)
        return Response(
            MissionRunOutput(selectors.mission_run_list(mission=mission), many=True).data
        )

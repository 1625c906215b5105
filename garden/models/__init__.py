"""garden's core rows: model accounts, agents, conversations, messages and artifacts, the
workers' beats, the beat's lease, personal access tokens, owners' token budgets, and the
workspaces people share."""

from garden.models.agents import Agent, ModelAccount
from garden.models.beat import BeatLease
from garden.models.budgets import TokenBudget
from garden.models.conversations import Conversation, Message
from garden.models.mcp import McpServer
from garden.models.memory import Artifact, AttachmentData, MemoryNote, PageVisit
from garden.models.runs import Goal, Run
from garden.models.tokens import AccessToken
from garden.models.workers import WorkerBeat
from garden.models.workspaces import Workspace, WorkspaceInvitation, WorkspaceMember

__all__ = [
    "AccessToken",
    "Agent",
    "Artifact",
    "AttachmentData",
    "BeatLease",
    "Conversation",
    "Goal",
    "McpServer",
    "MemoryNote",
    "Message",
    "ModelAccount",
    "PageVisit",
    "Run",
    "TokenBudget",
    "WorkerBeat",
    "Workspace",
    "WorkspaceInvitation",
    "WorkspaceMember",
]

"""Web frameworks' integrations (imported only by the user): ``integrations.starlette`` runs a
Starlette or FastAPI app's background work durably, as work queue runs (docs/fastapi.md).
"""

"""forge land: bring a batch's finished changes onto the base, one at a time, verified."""

from ._fetch import Fetched as Fetched
from ._fetch import fetch_change as fetch_change
from ._fetch import normalise_url as normalise_url
from ._fetch import remote_for as remote_for
from ._pending import finish_pending as finish_pending
from ._pending import read_pending as read_pending
from ._plan import LandPlan as LandPlan
from ._plan import batch_changes as batch_changes
from ._plan import has_landed as has_landed
from ._plan import order_changes as order_changes
from ._pr import PrOutcome as PrOutcome
from ._pr import PrStatus as PrStatus
from ._pr import gh_ready as gh_ready
from ._pr import has_pull_request as has_pull_request
from ._pr import open_pull_requests as open_pull_requests
from ._pr import pr_body as pr_body
from ._pr import pull_request_status as pull_request_status
from ._queue import LandOutcome as LandOutcome
from ._queue import LandSettings as LandSettings
from ._queue import land_all as land_all
from ._repo import LandGitError as LandGitError
from ._repo import checked_out_branch as checked_out_branch
from ._repo import checked_out_elsewhere as checked_out_elsewhere
from ._repo import head_of as head_of
from ._repo import require_repository as require_repository
from ._repo import tracked_changes as tracked_changes

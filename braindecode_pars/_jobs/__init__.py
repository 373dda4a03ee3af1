"""Private: what a process of a job needs to behave on a shared machine or a cluster
(stop signals, the folder lock, orphan protection, worker start). Not part of the public
interface."""

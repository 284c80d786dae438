"""What the hung-worker tests (on loopback and in a pod) hold a stopped worker's callers to.

The issue's terms: calls to a stopped worker fail fast or move elsewhere, the worker is
replaced within 5 s, and no call waits out its deadline after that.
"""

# The stopped worker killed and a new one started within this of the stop (issue 41).
REPLACED_WITHIN = 5.0
# A call that fails without waiting out its deadline ends well within this.
FAST_FAILURE = 0.5
# The kill resets the stopped worker's connections, and also the connections waiting in its
# listener's queue, made while it was stopped (a client whose keepalive ping went unanswered
# for 1 s reconnects, and the kernel gives the new connection to either listener of the
# port). Where the supervisor could not take that listener out of the port first (no
# pidfd_getfd: in a pod, seccomp refuses it), a channel whose reconnection reached it waits
# grpc's initial reconnect backoff (1 s, +-20 % jitter), failing calls at once meanwhile, and
# a retry policy's backoffs (0.1 s to 0.4 s) do not span it. Past that and a new connection,
# every call is answered; with the listener out first, every call started after the kill is.
RECONNECT_WINDOW = 2.0
# A test sees the kill when the worker's pid is gone (looked for every 20 ms); a call sent on
# its connection before the client read the reset is cut all the same (at once).
CUT_SECONDS = 0.25

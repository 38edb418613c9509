"""The method's stages between the data and the verifier call (paper §3-4): routing and cue generation
with their caches (`criteria`, `cues`; the routers live in `route/`), screenshot selection (`context`),
the evidence compiler (`evidence`), the fusion of rubric, cues and evidence into the verifier's prompt
(`fusion`), and the action classes the selector and the compiler share (`actions`). Knows nothing about
engines' internals, verdict files or the command line.
"""

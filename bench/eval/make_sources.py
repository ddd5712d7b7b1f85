"""Writes bench/eval/sources.json: long notes and conversation logs, several records per source, and
questions whose answers sit past the opening of a record or need two sources (issue 32).

    python bench/eval/make_sources.py   # deterministic; the JSON is committed

Each record is a run of turns: the fact a question asks about is placed after filler turns drawn from a
shared pool of everyday talk (as real logs are), so that the opening of the record is about something
else. Written for retained; questions have splits ('dev' for tuning, 'heldout' never tuned on).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

FILLER = [
    "Ana: morning all, sorry I'm late, the train was stuck outside the station again.",
    "Ben: no worries, we were just catching up on the weekend.",
    "Chris: did anyone see the match last night? What a finish.",
    "Ana: I still need someone to review my expense report before Friday.",
    "Dana: reminder that the office kitchen is being cleaned on Thursday, take your mugs home.",
    "Ben: the coffee machine on the third floor is broken again, use the one by the lifts.",
    "Chris: I'm out on Monday for a dentist appointment, back by lunch.",
    "Dana: can we keep this short today? I have a customer call at half past.",
    "Ana: the all-hands slides are in the shared drive if anyone wants to look before tomorrow.",
    "Ben: welcome to Eli, who joins us from the design team this week.",
    "Eli: thanks everyone, happy to be here, still finding my way around the codebase.",
    "Chris: let's go round the table quickly and then dig into the open points.",
    "Dana: my laptop decided to update itself during the demo yesterday, very embarrassing.",
    "Ana: has anyone booked the big meeting room for the quarterly planning yet?",
    "Ben: I'll send the notes afterwards, as usual, so nobody needs to write everything down.",
    "Eli: quick question about the holiday calendar, do we get the bank holiday in May?",
    "Chris: yes, and the office is closed between Christmas and new year as well.",
    "Dana: I moved the retro to Wednesday because half the team is travelling on Tuesday.",
    "Ana: the onboarding doc is out of date again, I'll fix the screenshots next week.",
    "Ben: please fill in the team survey, it closes at the end of the month.",
]

# source → list of records; each record: list of (turns that carry facts). Filler is put before them.
SOURCES = {
    "sync-2026-09-04": [
        ["Chris: decision on image processing: resizing moves out of the web app into a Lambda that listens on the uploads bucket.",
         "Ana: the web app then only writes the original and never blocks a request on Pillow again."],
        ["Dana: we also agreed that thumbnails are 320 pixels wide and stored next to the original with a -thumb suffix."],
        ["Ben: action for Eli: remove the old resize endpoint once the Lambda has run for a week without errors."],
    ],
    "sync-2026-09-11": [
        ["Ana: the nightly export to the finance warehouse failed three nights running because the service account key expired.",
         "Chris: we rotate that key every 90 days now and the rotation goes in the ops calendar."],
        ["Dana: finance asked that the export lands before 06:00 UTC so their morning reports are complete."],
        ["Ben: the export job is owned by Dana's team from now on; page them, not platform, when it breaks."],
    ],
    "retro-2026-09-18": [
        ["Eli: the release slipped because nobody knew that the mobile build needs the signing certificate from the old Mac mini.",
         "Chris: we move the certificate into the CI secrets store so that any runner can sign the build."],
        ["Ana: good thing: the canary stage caught the broken search ranking before it reached more than 5% of users."],
        ["Dana: we keep the canary at 5% for two hours before a full rollout, that worked well."],
    ],
    "notes-payments-migration": [
        ["The payments migration moves card processing from the old in-house gateway to Stripe in three phases.",
         "Phase one sends new customers to Stripe; existing customers stay on the old gateway until their card expires."],
        ["Refunds for charges made on the old gateway must still go through the old gateway until it is switched off in March."],
        ["Webhook events from Stripe are deduplicated by event id in the payments_events table, because Stripe retries deliveries."],
    ],
    "notes-search-outage": [
        ["Postmortem: on the 2nd the storefront search returned empty results for 40 minutes.",
         "The root cause was an index alias that pointed at a half-built index after the nightly rebuild was interrupted."],
        ["Fix: the rebuild now builds a new index and flips the alias only when the document count is within 1% of the old one."],
        ["Follow-up: an alert fires when search returns zero results for more than 5% of queries over ten minutes."],
    ],
    "chat-eli-onboarding": [
        ["Eli: how do I get a database to develop against?",
         "Ben: run make dev-db, it starts Postgres in docker with an anonymised snapshot from last week."],
        ["Eli: and where do I find the feature toggles for my local setup?",
         "Ben: they are read from config/flags.local.yaml, which is not committed; copy the example file next to it."],
        ["Eli: who approves access to production logs?",
         "Ben: Dana does, through a ticket in the access queue; access expires after 30 days."],
    ],
    "sync-2026-10-02": [
        ["Chris: the API gateway timeout goes from 30 to 60 seconds for the report endpoints only; everything else stays at 30."],
        ["Ana: we drop support for Internet Explorer 11 on the customer portal from November, marketing agreed."],
        ["Dana: the export job from last month now runs at 04:30 UTC so it lands well before the finance deadline."],
    ],
    "notes-mobile-release": [
        ["Mobile releases go out every second Wednesday; the branch is cut on Monday and QA signs off on Tuesday."],
        ["The app store review usually takes one day for iOS; plan hotfixes with that in mind."],
        ["Crash-free sessions must stay above 99.5% during the staged rollout, otherwise the rollout is halted."],
    ],
}

QUESTIONS = [
    ("where are uploaded pictures shrunk now?", ["sync-2026-09-04"], "dev"),
    ("how wide are the thumbnails?", ["sync-2026-09-04"], "heldout"),
    ("why did the finance export break?", ["sync-2026-09-11"], "dev"),
    ("who do I page when the warehouse export fails?", ["sync-2026-09-11"], "heldout"),
    ("what time does the finance export run and what is its deadline?", ["sync-2026-09-11", "sync-2026-10-02"], "dev"),
    ("why was the release late?", ["retro-2026-09-18"], "heldout"),
    ("how long does the canary run before everyone gets the release?", ["retro-2026-09-18"], "dev"),
    ("how do we refund a charge made before the Stripe switch?", ["notes-payments-migration"], "heldout"),
    ("are Stripe webhook events deduplicated?", ["notes-payments-migration"], "dev"),
    ("which customers stay on the old gateway?", ["notes-payments-migration"], "heldout"),
    ("what caused the empty search results?", ["notes-search-outage"], "dev"),
    ("when does the alias get switched to the new index?", ["notes-search-outage"], "heldout"),
    ("how do I run a local database?", ["chat-eli-onboarding"], "dev"),
    ("where do my local flag settings live?", ["chat-eli-onboarding"], "heldout"),
    ("how do I get access to production logs and for how long?", ["chat-eli-onboarding"], "dev"),
    ("what is the gateway timeout for reports?", ["sync-2026-10-02"], "heldout"),
    ("do we still support IE11 on the portal?", ["sync-2026-10-02"], "dev"),
    ("how often do mobile releases ship?", ["notes-mobile-release"], "heldout"),
    ("when is a staged mobile rollout stopped?", ["notes-mobile-release"], "dev"),
    ("what do we know about rollouts: canary size and when a mobile rollout is halted?",
     ["retro-2026-09-18", "notes-mobile-release"], "heldout"),
    ("what changed about mobile signing and how long is app store review?",
     ["retro-2026-09-18", "notes-mobile-release"], "dev"),
    ("what went wrong with search and what alert was added?", ["notes-search-outage"], "heldout"),
    ("what did we decide about image resizing and the old resize endpoint?", ["sync-2026-09-04"], "dev"),
    ("which alerts page someone: zero search results, and the export job?",
     ["notes-search-outage", "sync-2026-09-11"], "heldout"),
]


def main() -> None:
    rng = random.Random(32)
    memories = []
    for source, recs in SOURCES.items():
        for n, facts in enumerate(recs, 1):
            turns = rng.sample(FILLER, rng.randint(14, 19)) + facts + rng.sample(FILLER, rng.randint(0, 3))
            memories.append({"id": f"{source}#{n}", "scope": "/src/app", "source": source, "text": "\n".join(turns)})
    questions = [{"q": q, "sources": gold, "split": split} for q, gold, split in QUESTIONS]
    data = {"about": __doc__.split("\n\n")[0].replace("\n", " ") + " Generated by make_sources.py.",
            "memories": memories, "questions": questions}
    out = Path(__file__).with_name("sources.json")
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"{out}: {len(memories)} records from {len(SOURCES)} sources, {len(questions)} questions")


if __name__ == "__main__":
    main()

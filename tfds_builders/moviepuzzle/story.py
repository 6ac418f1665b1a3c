"""The synthetic corpus's dialogue: a small story grammar with causal order and filler.

Story events have ordered stages; a clip interleaves several of them with lines that carry no
order information. `write_dialogue` assigns lines to frames given a clip's layout.
"""

from __future__ import annotations

import numpy as np

P_TALK_ACTION, P_TALK_TALK = 0.4, 1.0  # chance that a frame has dialogue, per scene kind

# Story events: ordered stages, each a few alternative lines ({obj}/{loc}/{name} filled per
# instance). A stage never appears before an earlier stage of the same event instance.
EVENTS: dict[str, list[list[str]]] = {
    "search": [  # tied to an item pickup: asked before it, announced at it, kept after
        ["Where is the {obj}?", "Has anyone seen the {obj}?", "We lost the {obj}."],
        ["I found the {obj}.", "Here is the {obj}!", "The {obj} was right here."],
        ["Keep the {obj} safe.", "Now we have the {obj}.", "Never lose the {obj} again."],
    ],
    "travel": [  # planned in the previous scene, arrival early in this scene, leaving later
        ["We should go to the {loc}.", "Let's head to the {loc}.", "Meet me at the {loc}."],
        ["We are at the {loc}.", "So this is the {loc}.", "The {loc} is quiet today."],
        ["Time to leave the {loc}.", "Let's get out of the {loc}.", "We are done at the {loc}."],
    ],
    "meeting": [  # greeting early in the clip, farewell late
        ["Hello, {name}.", "Good morning, {name}.", "Nice to meet you, {name}."],
        ["Goodbye, {name}.", "See you later, {name}.", "Take care, {name}."],
    ],
    "newcomer": [  # "the stranger" before the introduction, the name after it
        [
            "Who is that stranger?",
            "The stranger is watching us.",
            "I don't trust that stranger.",
            "The stranger is back.",
            "Did you see the stranger?",
        ],
        ["This is {name}.", "Everyone, meet {name}.", "My name is {name}."],
        [
            "{name} is watching us.",
            "I trust {name}.",
            "Where did {name} go?",
            "{name} is back.",
            "Did you see {name}?",
        ],
    ],
}
# Conversations of talk scenes: scripts in causal order; a scene plays an ordered subset.
SCRIPTS: dict[str, list[str]] = {
    "meal": [
        "I am hungry.",
        "Is there any food left?",
        "Only some eggs and bread.",
        "Let's cook something.",
        "Pass me the salt.",
        "It smells good.",
        "Dinner is ready.",
        "That was delicious.",
        "I will wash the dishes.",
        "The kitchen is clean now.",
    ],
    "repair": [
        "The {obj} is broken.",
        "Can you fix the {obj}?",
        "I need my tools.",
        "Here are your tools.",
        "Hold the {obj} still.",
        "Almost done.",
        "The {obj} works again.",
        "Thanks for fixing the {obj}.",
        "Don't break the {obj} again.",
        "I promise I will be careful.",
    ],
    "plan": [
        "We need a plan.",
        "I have an idea.",
        "First we wait, then we run.",
        "What if they see us?",
        "They won't see us.",
        "Are you ready?",
        "Now! Go!",
        "Keep running!",
        "We made it.",
        "The plan worked!",
    ],
    "friend": [
        "Who is {name}?",
        "{name} is my old friend.",
        "Where is {name} now?",
        "{name} moved away.",
        "Can we find {name}?",
        "Let's call {name}.",
        "{name} is not answering.",
        "Try again.",
        "{name} answered at last.",
        "{name} said yes.",
    ],
    "call": [
        "The phone is ringing.",
        "Who is it?",
        "Hello? Yes?",
        "It was {name}.",
        "What did {name} want?",
        "{name} is coming here.",
        "When?",
        "{name} is late.",
        "Someone is at the door.",
        "{name} finally arrived.",
    ],
    "letter": [
        "A letter came for you.",
        "Who sent it?",
        "It is from {name}.",
        "Open the letter.",
        "What does it say?",
        "{name} needs help.",
        "We must answer the letter.",
        "Write it tonight.",
        "I wrote the answer.",
        "I sent the answer.",
    ],
    "quarrel": [
        "You lied to me.",
        "I did not lie.",
        "Then explain this.",
        "It is not what you think.",
        "I am listening.",
        "I was afraid to tell you.",
        "I am sorry.",
        "Let's forget it.",
        "Friends again?",
        "Friends again.",
    ],
}
EVENTS |= {k: [[line] for line in v] for k, v in SCRIPTS.items()}
P_NEWCOMER, P_REFERENCE = 0.8, 0.7  # a clip introduces a newcomer; free lines refer to them
FILLER = (
    "Hmm.",
    "Look at this.",
    "Really?",
    "Okay.",
    "I see.",
    "What?",
    "Listen.",
    "Wait.",
    "Yes.",
    "No.",
    "Be careful.",
    "I don't know.",
    "Maybe.",
    "Are you sure?",
    "Interesting.",
    "Right.",
)
SOUNDS = ("// [Footsteps]", "// [Music Playing]", "[Wind Howling]", "// [Dog Barking]")


def _place(rng: np.random.Generator, used: list[bool], allowed: list[list[int]]) -> list[int]:
    """Increasing free slots for as many leading stages as fit (each from its allowed set)."""
    chosen, prev = [], -1
    if allowed and all(options == allowed[0] for options in allowed):  # a random ordered subset
        cands = [i for i in allowed[0] if not used[i]]
        chosen = sorted(int(i) for i in rng.choice(cands, min(len(allowed), len(cands)), False))
        allowed = []
    for j, options in enumerate(allowed):
        cands = [i for i in options if i > prev and not used[i]]
        if not cands:
            break
        rest = len(allowed) - j - 1  # leave room for the later stages
        prev = int(rng.choice(cands[: len(cands) - rest] if len(cands) > rest else cands[:1]))
        chosen.append(prev)
    for i in chosen:
        used[i] = True
    return chosen


def write_dialogue(rng: np.random.Generator, movie: dict, clip: dict) -> list[list[str]]:
    """Per-frame utterances from interleaved story events plus order-free filler.

    Also sets `clip["tags"]`: per frame, (event number, kind, stage, stages) of its event lines.
    """
    n, frames, locs = clip["n"], clip["frames"], clip["locs"]
    action = np.array([f["action"] for f in frames])
    talk = rng.uniform(size=n) < np.where(action, P_TALK_ACTION, P_TALK_TALK)
    if talk.sum() < 2:
        talk[rng.choice(n, 2, replace=False)] = True
    slots = []  # (frame index, scene) per line, in time order
    for f in np.flatnonzero(talk):
        two = rng.uniform() < (0.15 if action[f] else 0.3)
        slots += [(int(f), frames[f]["scene"])] * (2 if two else 1)
    lines: list[str | None] = [None] * len(slots)
    tags: list[tuple | None] = [None] * len(slots)
    used = [False] * len(slots)
    idx = range(len(slots))
    in_scene = [[i for i in idx if slots[i][1] == s] for s in range(len(locs))]
    newcomer = movie["cast"][int(rng.integers(1, len(movie["cast"])))]["name"]
    names = [c["name"] for c in movie["cast"] if c["name"] != newcomer]
    events = iter(range(10**6))

    def put(kind: str, allowed: list[list[int]], stages: list[int], **fill: str) -> list[int]:
        event = next(events)
        chosen = _place(rng, used, allowed[: len(stages)])
        for stage, i in zip(stages, chosen, strict=False):
            lines[i] = str(rng.choice(EVENTS[kind][stage])).format(**fill)
            tags[i] = (event, kind, stage, len(EVENTS[kind]))
        return chosen

    for s, loc in enumerate(locs):  # where they go
        here, before = in_scene[s], in_scene[s - 1] if s else []
        if rng.uniform() < 0.75 and here:
            plan = bool(before) and rng.uniform() < 0.7
            late_before = before[len(before) // 2 :]
            allowed = ([late_before] if plan else []) + [here[: (len(here) + 1) // 2], here]
            stages = ([0] if plan else []) + [1] + ([2] if rng.uniform() < 0.5 else [])
            put("travel", allowed, stages, loc=movie["locations"][loc]["name"])
    for f, obj in clip["pickups"]:  # what the hero finds
        if rng.uniform() < 0.8:
            asked = [i for i in idx if slots[i][0] < f]
            found = [i for i in idx if f <= slots[i][0] <= f + 2]
            after = [i for i in idx if slots[i][0] > f]
            put(
                "search",
                ([asked] if asked else []) + [found, after],
                [0, 1, 2] if asked else [1, 2],
                obj=obj,
            )
    if rng.uniform() < 0.5 and len(slots) >= 4:
        k = max(1, int(len(slots) * 0.4))
        put("meeting", [list(idx[:k]), list(idx[-k:])], [0, 1], name=str(rng.choice(names)))
    for s in range(len(locs)):  # conversations: talk scenes play most of a script
        free = [i for i in in_scene[s] if not used[i]]
        talky = not frames[next(f for f in range(n) if frames[f]["scene"] == s)]["action"]
        k = min(len(free), int(rng.integers(6, 11))) if talky else int(rng.integers(0, 3))
        if k >= 2:
            topic = str(rng.choice(list(SCRIPTS)))
            stages = sorted(int(x) for x in rng.choice(len(SCRIPTS[topic]), k, replace=False))
            put(
                topic,
                [free] * k,
                stages,
                obj=str(rng.choice(movie["objects"])),
                name=str(rng.choice(names)),
            )
    free = [i for i in idx if not used[i]]  # the newcomer: "the stranger" until introduced
    mid = [i for i in free if 0.2 * len(slots) <= i < 0.8 * len(slots)]
    mid = [i for i in mid if not action[slots[i][0]]] or mid  # preferably in a talk scene
    if mid and rng.uniform() < P_NEWCOMER:
        intro = int(rng.choice(mid))
        put("newcomer", [[intro]], [1], name=newcomer)
        event = tags[intro][0]
        for i in free:
            if i != intro and rng.uniform() < P_REFERENCE:
                stage = 0 if i < intro else 2
                lines[i] = str(rng.choice(EVENTS["newcomer"][stage])).format(name=newcomer)
                tags[i] = (event, "newcomer", stage, 3)
    subtitles: list[list[str]] = [[] if rng.uniform() < 0.5 else [""] for _ in range(n)]
    for f in np.flatnonzero(talk):
        subtitles[f] = []
    clip["tags"] = [[] for _ in range(n)]
    for (f, _), line, tag in zip(slots, lines, tags, strict=True):
        if line is None:
            line = str(rng.choice(SOUNDS)) if rng.uniform() < 0.1 else str(rng.choice(FILLER))
        else:
            clip["tags"][f].append(tag)
        subtitles[f].append(line)
    return subtitles

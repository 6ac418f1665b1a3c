"""`vnr.data.text.words` on every M-SyMoN script: nothing but separators is lost, and ASCII
text tokenizes exactly as with the earlier `re` rule (other benchmarks' numbers use it)."""

import json
import random
import re
import string
import unicodedata

import pytest

from tfds_builders.msymon.parse import LANGUAGES
from vnr.data.text import words

# The earlier rule (before the `regex` module), kept here as the reference for ASCII text.
_OLD_CJK = "\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff"
_OLD = re.compile(rf"[{_OLD_CJK}]|(?:[^\W_{_OLD_CJK}]|')+|[?!.,]")


def _kept(text: str) -> str:
    """What must survive: every character but white space, punctuation other than
    `' ? ! . ,`, and symbols (the separators), after NFC and lower-casing."""
    text = unicodedata.normalize("NFC", text).lower()
    return "".join(ch for ch in text if ch in "'?!.," or unicodedata.category(ch)[0] in "LMN")


def test_ascii_output_is_unchanged():
    rng = random.Random(0)
    texts = ["Don't stop -- it's 3.14, isn't it?!", "a_b c-d (e) [f] \"g\" ; h: i/j", ""]
    texts += ["".join(rng.choice(string.printable) for _ in range(rng.randint(0, 60)))
              for _ in range(3000)]
    for t in texts:
        assert words(t) == _OLD.findall(t.lower()), t


def test_combining_marks_stay_in_their_word():
    assert words("फिल्म") == ["फिल्म"]  # the vowel sign and virama were dropped before
    assert words("Café  naïve") == ["café", "naïve"]
    assert words("cafe\u0301") == ["café"]  # NFC: decomposed and composed forms agree
    assert words("他說：“你好。”") == ["他", "說", "你", "好"]  # CJK: one token per character
    assert words("Привет, мир!") == ["привет", ",", "мир", "!"]


def test_one_real_sentence_per_language_keeps_every_character(shared_data):
    for lang in LANGUAGES:
        ann = json.loads((shared_data / "msymon" / "annotations" / lang / "train.json")
                         .read_text(encoding="utf-8"))
        text = ann[sorted(ann)[0]][0]["text"]
        toks = words(text)
        assert "".join(toks) == _kept(text), (lang, text, toks)
        assert all(t.strip() and " " not in t for t in toks)
        if lang == "ch":  # every ideograph a token of its own (digits stay one number)
            assert all(len(t) == 1 for t in toks if "\u4e00" <= t[0] <= "\u9fff")
            assert "15" in toks
        if lang == "hi":
            assert "फिल्म" in toks


@pytest.mark.parametrize("text", ["ok ?", "a.b", "x,y"])
def test_punctuation_tokens(text):
    assert "".join(words(text)) == _kept(text)

"""SQuAD EM/F1 (official v1.1 and v2.0 rules) and SPEC §2 word positions, on hand-computed cases."""

from __future__ import annotations

import pytest

from l2d_core.qa.positions import (
    NOT_FOUND_POS,
    NULL_POS,
    ContextIndex,
    Location,
    endpoint_correct,
    gold_positions,
    is_no_answer,
    locate,
)
from l2d_core.qa.squad_eval import exact_match, f1, normalize_answer, normalized_words, score_answers

# ----------------------------------------------------------------------------- normalization


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("The Quick, Brown Fox!", "quick brown fox"),
        ("An apple a day", "apple day"),
        ("theater anthem", "theater anthem"),  # articles only as whole words
        ("A.B.C.", "abc"),
        ("  Hello\tWorld\n ", "hello world"),
        ("Anne's", "annes"),
        # punctuation goes before articles (official order): "the-end" -> "theend", not "end"
        ("the-end", "theend"),
        ("(The) end", "end"),
        ("", ""),
        ("the a an", ""),
    ],
)
def test_normalize_answer(raw, expected):
    assert normalize_answer(raw) == expected


def test_normalized_words():
    assert normalized_words("The cat, the hat; A bat.") == ["cat", "hat", "bat"]
    assert normalized_words("...") == []


# ----------------------------------------------------------------------------- EM / F1 v1.1


def test_exact_match_v11():
    assert exact_match("Denver Broncos", ["denver broncos!"]) == 1.0
    assert exact_match("Broncos", ["Denver Broncos"]) == 0.0
    assert exact_match("Broncos", ["Denver Broncos", "the Broncos"]) == 1.0  # any gold
    assert exact_match("", ["Paris"]) == 0.0


def test_v11_needs_gold():
    with pytest.raises(ValueError):
        exact_match("Paris", [])
    with pytest.raises(ValueError):
        f1("Paris", [])


@pytest.mark.parametrize(
    "pred, golds, expected",
    [
        ("Denver Broncos team", ["Denver Broncos"], 0.8),  # P=2/3, R=1
        ("the big red dog", ["a red dog barked"], 2 / 3),  # P=R=2/3
        ("dog dog dog", ["dog cat"], 0.4),  # multiset overlap 1: P=1/3, R=1/2
        ("red dog", ["blue cat", "red dog barked"], 0.8),  # max over golds: P=1, R=2/3
        ("Paris", ["Rome"], 0.0),
        ("", ["Paris"], 0.0),
        ("Paris!", ["paris"], 1.0),
    ],
)
def test_f1_v11(pred, golds, expected):
    assert f1(pred, golds) == pytest.approx(expected)


def test_v11_empty_after_normalization():
    # official v1.1: EM compares normalized strings ('' == ''), F1 has no common token -> 0
    assert exact_match("the", ["a"]) == 1.0
    assert f1("the", ["a"]) == 0.0


# ----------------------------------------------------------------------------- EM / F1 v2.0


def test_v2_unanswerable():
    assert exact_match("", [], v2=True) == 1.0
    assert f1("", [], v2=True) == 1.0
    assert exact_match("Paris", [], v2=True) == 0.0
    assert f1("Paris", [], v2=True) == 0.0


def test_v2_empty_prediction_on_answerable_is_wrong():
    assert exact_match("", ["Paris"], v2=True) == 0.0
    assert f1("", ["Paris"], v2=True) == 0.0
    # a prediction that normalizes to nothing is empty too
    assert f1("the", ["Paris"], v2=True) == 0.0


def test_v2_drops_golds_with_empty_normalization():
    # v1.1 keeps the gold "the": '' == normalize('the') -> EM 1 for an empty prediction
    assert exact_match("", ["the", "Paris"]) == 1.0
    # v2.0 drops it, so only "Paris" is left
    assert exact_match("", ["the", "Paris"], v2=True) == 0.0
    assert exact_match("Paris", ["the", "Paris"], v2=True) == 1.0
    # every gold empty after normalization -> treated as unanswerable ([""])
    assert exact_match("", ["a", "The"], v2=True) == 1.0
    assert f1("", ["a", "The"], v2=True) == 1.0
    assert f1("the", ["a"], v2=True) == 1.0  # both token lists empty
    assert exact_match("Paris", ["a", "The"], v2=True) == 0.0


def test_v2_f1_answerable_same_as_v11():
    assert f1("Denver Broncos team", ["Denver Broncos"], v2=True) == pytest.approx(0.8)


def test_score_answers():
    preds = {"q1": "Paris", "q2": "Rome x"}
    golds = {"q1": ["paris"], "q2": ["Rome"], "q3": ["Oslo"]}
    out = score_answers(preds, golds)
    assert out["missing"] == 1
    assert out["exact_match"] == pytest.approx(100 / 3)
    assert out["f1"] == pytest.approx(100 * (1 + 2 / 3 + 0) / 3)  # q2: P=1/2, R=1
    v2 = score_answers({"a": "", "b": "x"}, {"a": [], "b": []}, v2=True)
    assert v2 == {"exact_match": 50.0, "f1": 50.0, "missing": 0}
    with pytest.raises(ValueError):
        score_answers({}, {})


# ----------------------------------------------------------------------------- positions

CTX = "The cat sat on a mat. The cat, however, left the mat!"
# normalized words: cat(0) sat(1) on(2) mat(3) cat(4) however(5) left(6) mat(7)
# characters:       "mat." is [17, 21), "mat!" is [49, 53)
IDX = ContextIndex.build(CTX)

CTX2 = "Tesla was born in Smiljan, Croatia in 1856."
# tesla(0) was(1) born(2) in(3) smiljan(4) croatia(5) in(6) 1856(7); "Smiljan," is [18, 26)
IDX2 = ContextIndex.build(CTX2)


def test_context_words_drop_articles_and_punctuation():
    assert IDX.words == ("cat", "sat", "on", "mat", "cat", "however", "left", "mat")
    assert IDX2.words == ("tesla", "was", "born", "in", "smiljan", "croatia", "in", "1856")


def test_char_span_to_words():
    assert IDX.char_span_to_words(49, 52) == (7, 7)
    assert IDX.char_span_to_words(4, 21) == (0, 3)  # "cat sat on a mat." ("a" has no word)
    assert IDX.char_span_to_words(15, 16) is None  # just the article "a"


def test_locate_exact_and_punctuation():
    assert locate("cat sat", IDX) == Location(0, 1, "exact")
    assert locate("A cat, however", IDX) == Location(4, 5, "exact")
    assert locate("however, LEFT", IDX) == Location(5, 6, "exact")
    assert locate("sat on the mat", IDX) == Location(1, 3, "exact")


def test_locate_first_occurrence_is_ambiguous():
    assert locate("the mat", IDX) == Location(3, 3, "ambiguous")
    assert locate("cat", IDX)[:2] == (0, 0)


def test_locate_gold_offset_picks_that_occurrence():
    assert locate("mat", IDX, char_start=49) == Location(7, 7, "offset")
    assert locate("mat", IDX, char_start=17) == Location(3, 3, "offset")
    assert locate("the cat", IDX, char_start=22)[:2] == (4, 4)
    # an answer that occurs once is 'exact' whatever the offset
    assert locate("however", IDX, char_start=31) == Location(5, 5, "exact")


@pytest.mark.parametrize("answer", ["", "?", "  ? ", "   ", None])
def test_locate_null(answer):
    assert is_no_answer(answer)
    assert locate(answer, IDX, context=CTX) == Location(NULL_POS, NULL_POS, "null")


def test_is_no_answer_false_for_text():
    assert not is_no_answer("Paris?")
    assert not is_no_answer("0")


def test_locate_not_found():
    assert locate("dog", IDX) == Location(NOT_FOUND_POS, NOT_FOUND_POS, "not_found")
    assert locate("dog", IDX, context=CTX) == Location(-2, -2, "not_found")
    # words present but not contiguous
    assert locate("sat mat", IDX, context=CTX).status == "not_found"


def test_locate_cut_inside_token_uses_substring():
    # "Smilj" is no normalized word: without the context it cannot be found
    assert locate("Smilj", IDX2).status == "not_found"
    assert locate("Smilj", IDX2, context=CTX2) == Location(4, 4, "substring")
    assert locate("SMILJ", IDX2, context=CTX2) == Location(4, 4, "substring")  # case-insensitive
    assert locate("jan, Croa", IDX2, context=CTX2) == Location(4, 5, "substring")
    assert locate("856", IDX2, context=CTX2) == Location(7, 7, "substring")


def test_substring_fallback_respects_gold_offset():
    ctx = "Xcat Ycat"  # words xcat(0) ycat(1); "cat" is no word
    idx = ContextIndex.build(ctx)
    assert locate("cat", idx, None, ctx) == Location(0, 0, "substring")
    assert locate("cat", idx, 6, ctx) == Location(1, 1, "substring")


def test_substring_fallback_offsets_with_length_changing_lowercase():
    ctx = "\u0130\u0130 ab cd"  # "İİ ab cd": words (i̇i̇, ab, cd)
    idx = ContextIndex.build(ctx)
    assert locate("b", idx, context=ctx) == Location(1, 1, "substring")


def test_gold_positions():
    assert gold_positions([], None, IDX, CTX) == [(-1, -1)]
    # the occurrence at the gold offset, plus the first occurrence of the same text
    golds = gold_positions(["mat"], [49], IDX, CTX)
    assert (7, 7) in golds
    assert golds == [(3, 3), (7, 7)]
    assert gold_positions(["mat"], [17], IDX, CTX) == [(3, 3)]
    assert gold_positions(["cat sat", "the cat sat on a mat"], [4, 0], IDX, CTX) == [(0, 1), (0, 3)]
    # an unlocatable gold answer is dropped
    assert gold_positions(["dog", "however"], [0, 31], IDX, CTX) == [(5, 5)]
    assert gold_positions(["Smilj"], [18], IDX2, CTX2) == [(4, 4)]
    assert gold_positions(["however"], None, IDX, CTX) == [(5, 5)]


def test_endpoint_correct_any_gold_per_endpoint():
    golds = [(3, 4), (0, 5)]
    assert endpoint_correct(Location(3, 4, "exact"), golds) == (True, True)
    assert endpoint_correct((3, 5), golds) == (True, True)  # start from one gold, end from another
    assert endpoint_correct((1, 4), golds) == (False, True)
    assert endpoint_correct((0, 2), golds) == (True, False)
    assert endpoint_correct((1, 2), golds) == (False, False)


def test_endpoint_correct_null_and_not_found():
    assert endpoint_correct((-1, -1), [(-1, -1)]) == (True, True)
    assert endpoint_correct((-1, -1), [(3, 4)]) == (False, False)
    assert endpoint_correct((3, 4), [(-1, -1)]) == (False, False)
    # not found is never correct, not even against a (-2, -2) "gold"
    assert endpoint_correct(Location(-2, -2, "not_found"), [(-2, -2)]) == (False, False)
    assert endpoint_correct((-2, -2), []) == (False, False)


def test_end_to_end_prediction_vs_gold():
    golds = gold_positions(["the mat"], [45], IDX, CTX)  # gold at the second "the mat"
    pred = locate("Mat!", IDX, context=CTX)  # a text-only agent: first occurrence
    assert endpoint_correct(pred, golds) == (True, True)
    pred = locate("left the mat", IDX, context=CTX)  # (6, 7): end right, start wrong
    assert endpoint_correct(pred, golds) == (False, True)
    assert endpoint_correct(locate("?", IDX), golds) == (False, False)
    assert endpoint_correct(locate("Smilj", IDX), golds) == (False, False)

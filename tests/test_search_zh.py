"""The site's Chinese search: the glossary's terms teach jieba the book's words."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location(
    "search_zh", ROOT / "book" / "_ext" / "search_zh.py")
search_zh = importlib.util.module_from_spec(spec)
spec.loader.exec_module(search_zh)


def test_glossary_terms_are_the_chinese_side_of_each_row():
    row = "| **Multi-head attention** · 多头注意力 / 繁: 多頭注意力 | H attentions 注释 |"
    assert search_zh.glossary_terms(row) == ["多头注意力", "多頭注意力"]
    terms = search_zh.glossary_terms(search_zh.GLOSSARY.read_text(encoding="utf-8"))
    assert {"多头注意力", "自注意力", "掩码"} <= set(terms)
    assert all(not term.isascii() for term in terms)


def test_the_glossary_keeps_self_attention_one_word_and_finds_its_parts(tmp_path):
    import jieba

    words = tmp_path / "words.txt"
    terms = search_zh.glossary_terms(search_zh.GLOSSARY.read_text(encoding="utf-8"))
    words.write_text("".join(f"{t}\n" for t in terms), encoding="utf-8")
    segmenter = jieba.Tokenizer()
    segmenter.load_userdict(str(words))
    found = set(segmenter.cut_for_search("自注意力和多头注意力"))
    assert {"自注意力", "注意", "注意力", "多头"} <= found

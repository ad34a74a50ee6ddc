#!/usr/bin/env python3
"""check_function_length.py SRC_DIR [--max=N] [--allow=FILE] [--all]

Fails (exit 1, one line per function) if a function in the library and app
layers (docs/design.md, "Layers": storage/, server/, consistency/, client/,
apps/ by default) is longer than --max lines (default 120), counted from the
first line of its signature to its closing brace. Lambdas and local classes
count toward the function that holds them. Functions named in the allow file
(lines "path:Name", '#' comments) are reported as allowed instead; an entry
that no longer matches a long function is itself an error, so the list only
shrinks. --all prints every function over the limit and its length, allowed or
not, and exits 0.

A brace counter, not a compiler: comments, string, character and raw string
literals and preprocessor lines are blanked first; a '{' at namespace or class
scope opens a function body when the text before it (since the previous ';',
'{' or '}') has a top-level '(' and the brace follows ')', a specifier such as
'const' or 'override', or a trailing return type. A file whose braces do not
balance is an error, so a construct this misreads fails loudly.
"""
import os
import re
import sys

DEFAULT_DIRS = ["storage", "server", "consistency", "client", "apps"]
SUFFIXES = (".cc", ".h")
BODY_AFTER = {")", "const", "override", "final", "noexcept", "mutable",
              "volatile", "&", "&&", "try"}
ACCESS = {"public", "private", "protected"}
TEST_MACROS = {"TEST", "TEST_F", "TEST_P", "TYPED_TEST", "TYPED_TEST_P"}


def blank(text):
    """Comments, literals and preprocessor lines as spaces; newlines kept."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":
            # Preprocessor directive, with backslash continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        line_start = False
        if c == "\n":
            out.append(c)
            line_start = True
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif c == "R" and text.startswith('"', i + 1) and not _in_word(text, i):
            m = re.match(r'R"([^(\s]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            close = ")" + m.group(1) + '"'
            end = text.find(close, i + m.end())
            end = n if end < 0 else end + len(close)
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif c == '"' or (c == "'" and not _digit_separator(text, i)):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _in_word(text, i):
    """True if text[i] continues an identifier (u8R"..." counts as raw)."""
    j = i - 1
    while j >= 0 and (text[j].isalnum() or text[j] == "_"):
        j -= 1
    word = text[j + 1:i]
    return word not in ("", "u8", "u", "U", "L")


def _digit_separator(text, i):
    """True for the ' in 1'000'000."""
    j = i - 1
    while j >= 0 and (text[j].isalnum() or text[j] in "_."):
        j -= 1
    word = text[j + 1:i]
    return word != "" and word[0].isdigit()


TOKEN = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|::|->|&&|\d[\w.']*|\S")


def tokens(clean):
    for lineno, line in enumerate(clean.split("\n"), 1):
        for m in TOKEN.finditer(line):
            yield lineno, m.group(0)


def function_name(header):
    """Name of a function from the tokens of its signature."""
    toks = [t for _, t in header]
    if toks and toks[0] == "template":
        depth, k = 0, 1
        while k < len(toks):
            depth += {"<": 1, ">": -1}.get(toks[k], 0)
            k += 1
            if depth == 0:
                break
        toks = toks[k:]
    depth = 0
    for k, t in enumerate(toks):
        if t == "(" and depth == 0 and k > 0:
            j = k - 1
            if toks[j] in TEST_MACROS:
                close = toks.index(")", k)
                return toks[j] + "(" + "".join(
                    x if x != "," else ", " for x in toks[k + 1:close]) + ")"
            if re.match(r"[A-Za-z_~]", toks[j]) or toks[j - 1:j] == ["operator"]:
                start = j
                while start >= 2 and toks[start - 1] == "::":
                    start -= 2
                if start >= 1 and toks[start - 1] == "~":
                    start -= 1
                if toks[start:j + 1] and toks[start - 1:start] == ["operator"]:
                    start -= 1
                return "".join(toks[start:j + 1])
            if j >= 1 and toks[j - 1] == "operator":
                return "operator" + toks[j]
        if t == "(":
            depth += 1
        elif t == ")":
            depth -= 1
    return "?"


def functions(path, text):
    """Yields (first_line, last_line, name) for each function body in text."""
    # Scope stack entries: [kind, header_tokens_or_None, start_line, name].
    # kind: "ns" (namespace or file), "class", "func", "init" (an initializer
    # at namespace or class scope), "expr" (braces inside a signature or an
    # initializer list; closing returns to the header).
    stack = [["ns", None, 0, ""]]
    header = []
    paren = 0
    for lineno, tok in tokens(blank(text)):
        kind = stack[-1][0]
        if kind in ("func", "init"):
            if tok == "{":
                stack.append([kind + "-inner", None, 0, ""])
            elif tok == "}":
                top = stack.pop()
                if kind == "func":
                    yield top[2], lineno, top[3]
                header, paren = [], 0
            continue
        if kind in ("func-inner", "init-inner", "expr"):
            if tok == "{":
                stack.append([kind if kind != "expr" else "expr", None, 0, ""])
            elif tok == "}":
                top = stack.pop()
                if top[0] == "expr" and stack[-1][0] in ("ns", "class"):
                    header, paren = top[1], top[2]
                    header.append((lineno, tok))
            continue
        # Namespace or class scope: collect a declaration header.
        if tok == ";":
            header, paren = [], 0
            continue
        if tok == ":" and stack[-1][0] == "class" and len(header) == 1 and \
                header[0][1] in ACCESS:
            header, paren = [], 0
            continue
        if tok == "(":
            paren += 1
        elif tok == ")":
            paren -= 1
        if tok == "}":
            if len(stack) == 1:
                raise ValueError("%s:%d: unbalanced '}'" % (path, lineno))
            stack.pop()
            header, paren = [], 0
            continue
        if tok != "{":
            header.append((lineno, tok))
            continue
        words = [t for _, t in header]
        prev = words[-1] if words else ""
        if paren > 0 or _in_init_list(words):
            # A braced argument or member initializer inside a signature.
            stack.append(["expr", header, paren, ""])
            header, paren = [], 0
            continue
        if "namespace" in words or words[:1] == ["extern"] or not words:
            stack.append(["ns", None, 0, ""])
        elif _is_function(words, prev):
            stack.append(["func", None, header[0][0], function_name(header)])
        elif any(w in ("class", "struct", "union", "enum") for w in words) \
                and "=" not in words and "(" not in words:
            stack.append(["class", None, 0, ""])
        else:
            stack.append(["init", None, 0, ""])
        header, paren = [], 0
    if len(stack) != 1:
        raise ValueError("%s: unbalanced braces at end of file (%s open)" %
                         (path, stack[-1][0]))


def _is_function(words, prev):
    if "(" not in words:
        return False
    if prev in BODY_AFTER:
        return True
    if prev == "}" and _init_colon(words):
        return True  # Foo() : a_{x} {
    # A trailing return type: ") -> T {".
    last_close = len(words) - 1 - words[::-1].index(")") if ")" in words else -1
    return last_close >= 0 and "->" in words[last_close:]


def _init_colon(words):
    """True if a ':' follows the parameter list (member initializers)."""
    depth, seen_params = 0, False
    for w in words:
        if w == "(":
            depth += 1
        elif w == ")":
            depth -= 1
            seen_params = seen_params or depth == 0
        elif w == ":" and depth == 0 and seen_params:
            return True
    return False


def _in_init_list(words):
    """True if the header ends inside a constructor's member initializers
    and the next '{' belongs to a member (a_{x}), not to the body."""
    if not words or not _init_colon(words):
        return False
    last = words[-1]
    return last == ">" or (re.match(r"[A-Za-z_]", last) is not None and
                           last not in BODY_AFTER)


def source_files(root, dirs):
    for d in dirs:
        for base, subdirs, files in os.walk(os.path.join(root, d)):
            subdirs[:] = sorted(s for s in subdirs if not s.startswith("."))
            for f in sorted(files):
                if f.endswith(SUFFIXES):
                    yield os.path.join(base, f)


def read_allow(path):
    allow = set()
    if path:
        with open(path) as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    allow.add(line)
    return allow


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "")
                for a in argv[1:] if a.startswith("--"))
    if len(args) < 1:
        print(__doc__.strip().split("\n")[0])
        return 2
    root = args[0]
    dirs = args[1:] or DEFAULT_DIRS
    limit = int(opts.get("max", 120))
    allow = read_allow(opts.get("allow"))
    show_all = "all" in opts
    bad = 0
    used = set()
    for path in source_files(root, dirs):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        try:
            found = list(functions(rel, text))
        except ValueError as e:
            print("function-length: cannot parse %s" % e)
            bad = 1
            continue
        for first, last, name in found:
            length = last - first + 1
            if length <= limit:
                continue
            key = "%s:%s" % (rel, name)
            if show_all:
                print("%4d %s:%d %s%s" % (length, rel, first, name,
                                          "  (allowed)" if key in allow else ""))
            elif key in allow:
                used.add(key)
            else:
                print("function-length: %s:%d %s is %d lines (max %d)" %
                      (rel, first, name, length, limit))
                bad = 1
    if not show_all:
        for key in sorted(allow - used):
            if key.split(":", 1)[0].split("/", 1)[0] in dirs:
                print("function-length: allow-list entry %s matches no function "
                      "over %d lines; remove it" % (key, limit))
                bad = 1
    return 0 if show_all else bad


if __name__ == "__main__":
    sys.exit(main(sys.argv))

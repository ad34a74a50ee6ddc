#!/usr/bin/env python3
"""Proves check_function_length.py measures what it claims: each case is a
small source with the constructs a brace counter can misread (constructor
initializers with braces, raw strings, digit separators, braces in comments
and strings, lambdas, members initialized with braces, inline methods,
TEST macros) and the functions, with their first and last lines, it must
find. Then a whole tree: a long function fails the check, its allow-list
entry passes it, and a stale entry fails it."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import check_function_length as cfl  # noqa: E402

CASES = [
    ("plain", "int f(int a) {\n  return a;\n}\n", [(1, 3, "f")]),
    ("qualified", "namespace a {\nStatus X::Y::Z(int a) const {\n  return {};\n}\n}\n",
     [(2, 4, "X::Y::Z")]),
    ("init_list_braces",
     "Foo::Foo(int a)\n    : a_{a},\n      b_(a),\n      c_{std::vector<int>{1, 2}} {\n"
     "  Init();\n}\n", [(1, 6, "Foo::Foo")]),
    ("raw_string", 'void f() {\n  const char* s = R"x(}}} { )x";\n}\nvoid g() {}\n',
     [(1, 3, "f"), (4, 4, "g")]),
    ("comments_strings",
     "void f() {\n  // }\n  /* { */ const char* s = \"}\"; char c = '}';\n}\n",
     [(1, 4, "f")]),
    ("digit_separator", "void f() {\n  int n = 1'000'000; char c = '{';\n}\n",
     [(1, 3, "f")]),
    ("lambda_inside", "void f() {\n  auto g = [&](int x) -> int {\n    return x;\n  };\n}\n",
     [(1, 5, "f")]),
    ("class_members",
     "class A {\n public:\n  int size() const { return n_; }\n  std::function<void(int)> cb_{};\n"
     "  std::atomic<int> n_{0};\n  A() : n_{1} {}\n};\n",
     [(3, 3, "size"), (6, 6, "A")]),
    ("initializer_table", "const int kT[] = {\n  1, 2,\n};\nint f() { return kT[0]; }\n",
     [(4, 4, "f")]),
    ("enum_struct", "enum class E : int {\n  kA,\n};\nstruct S : B<int> {\n  void f() {}\n};\n",
     [(5, 5, "f")]),
    ("test_macro", "TEST(Suite, Name) {\n  EXPECT_TRUE(true);\n}\n", [(1, 3, "TEST(Suite, Name)")]),
    ("trailing_return", "auto f(int a) -> int {\n  return a;\n}\n", [(1, 3, "f")]),
    ("braced_argument", "Foo kFoo(Bar{1, 2});\nvoid f() {\n}\n", [(2, 3, "f")]),
    ("preprocessor", "#define X() {\nvoid f() {\n#if A\n#endif\n}\n", [(2, 5, "f")]),
    ("multiline_signature", "Status\nLongName(int a,\n         int b) EXCLUSIVE_LOCKS_REQUIRED(mu_) {\n}\n",
     [(1, 4, "LongName")]),
]


def run_cases():
    fails = 0
    for name, src, want in CASES:
        try:
            got = list(cfl.functions(name, src))
        except ValueError as e:
            got = str(e)
        if got != want:
            print("FAIL %s: expected %s, got %s" % (name, want, got))
            fails += 1
        else:
            print("ok   %s" % name)
    try:
        list(cfl.functions("unbalanced", "void f() {\n"))
        print("FAIL unbalanced: no error")
        fails += 1
    except ValueError:
        print("ok   unbalanced")
    return fails


def run_tree():
    fails = 0
    script = os.path.join(HERE, "check_function_length.py")
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "storage"))
        with open(os.path.join(root, "storage", "a.cc"), "w") as f:
            f.write("void Long() {\n" + "  x();\n" * 120 + "}\nvoid Short() {\n}\n")
        allow = os.path.join(root, "allow.txt")

        def check(name, want_rc, allow_text=None):
            args = [sys.executable, script, root, "--max=120"]
            if allow_text is not None:
                with open(allow, "w") as f:
                    f.write(allow_text)
                args.append("--allow=" + allow)
            rc = subprocess.run(args, stdout=subprocess.DEVNULL).returncode
            ok = rc == want_rc
            print("%s %s" % ("ok  " if ok else "FAIL", name))
            return 0 if ok else 1

        fails += check("tree_long_fails", 1)
        fails += check("tree_allowed_passes", 0, "# why\nstorage/a.cc:Long\n")
        fails += check("tree_stale_entry_fails", 1, "storage/a.cc:Long\nstorage/a.cc:Short\n")
    return fails


if __name__ == "__main__":
    sys.exit(1 if run_cases() + run_tree() else 0)

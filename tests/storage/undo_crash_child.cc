// Child process of storage_undo_crash_test. Prints one line per step on
// stdout and ends by SIGKILLing itself (a crash, no clean close).
//
// Usage: storage_undo_crash_child --dir=D --mode=parts|undo
//   parts: creates the store and applies the workload (undo_crash_workload.h),
//          prints "parts";
//   undo:  opens the store, prints "opened", takes back client 0's incomplete
//          clock as kNewIncarnation, prints "undone MS" (MS: how long it took).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "tests/storage/undo_crash_workload.h"

namespace {

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "storage_undo_crash_child: %s\n", msg.c_str());
  std::exit(2);
}

void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pace;
  std::string dir, mode;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--dir=", 6) == 0) {
      dir = argv[i] + 6;
    } else if (std::strncmp(argv[i], "--mode=", 7) == 0) {
      mode = argv[i] + 7;
    } else {
      Die(std::string("unknown argument ") + argv[i]);
    }
  }
  if (dir.empty() || (mode != "parts" && mode != "undo")) Die("need --dir and --mode=parts|undo");
  std::unique_ptr<ShardStore> store;
  Status st = ShardStore::Open(undo_crash::StoreOptions(), dir, &store);
  if (!st.ok()) Die("open: " + st.ToString());
  if (mode == "parts") {
    TableSchema s, created;
    s.name = "counts";
    s.type = ElementType::kI64;
    s.width = undo_crash::kWidth;
    st = store->CreateTable(s, &created);
    if (st.ok()) st = undo_crash::ApplyWorkload(store.get(), created.id);
    if (!st.ok()) Die("workload: " + st.ToString());
    Say("parts");
  } else {
    Say("opened");
    const auto t0 = std::chrono::steady_clock::now();
    UndoResult r;
    st = store->UndoIncompleteClock(0, undo_crash::kNewIncarnation, &r);
    if (!st.ok()) Die("undo: " + st.ToString());
    if (!r.undone) Die("nothing to undo");
    Say("undone " + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::steady_clock::now() - t0)
                                       .count()));
  }
  ::kill(::getpid(), SIGKILL);
  return 3;
}

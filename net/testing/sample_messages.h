// Test support for net/: one message of every type with non-trivial field
// values, and a field-by-field comparison of messages.
#ifndef PACE_NET_TESTING_SAMPLE_MESSAGES_H_
#define PACE_NET_TESTING_SAMPLE_MESSAGES_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/schema.h"
#include "net/messages.h"

namespace pace::net::testing {

// At least one message of every Message alternative, with every field set to
// a value other than its default (extreme integers, strings with NUL bytes,
// several rows).
std::vector<Message> SampleMessages();

// A schema with every field set.
TableSchema SampleSchema(uint32_t id, const std::string& name);

// Success iff `a` and `b` hold the same alternative with equal fields; the
// failure message names the first field that differs.
::testing::AssertionResult SameMessage(const Message& a, const Message& b);

// EncodeFrame that fails the current test on error.
std::string EncodeOrFail(const Message& m);

}  // namespace pace::net::testing

#endif  // PACE_NET_TESTING_SAMPLE_MESSAGES_H_

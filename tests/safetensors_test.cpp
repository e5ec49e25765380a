// The safetensors reader and writer: round trips, every dtype conversion, and malformed files, each of which must
// be a one-line FormatError (never a crash). The fuzzer's corpus (tests/corpus/safetensors) is replayed here too.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "wgtrain/safetensors.h"

namespace wgtrain {
namespace {

namespace st = safetensors;

std::vector<uint8_t> file_of(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> f(8 + header.size() + data.size());
  const uint64_t n = header.size();
  std::memcpy(f.data(), &n, 8);
  std::copy(header.begin(), header.end(), f.begin() + 8);
  std::copy(data.begin(), data.end(), f.begin() + 8 + static_cast<std::ptrdiff_t>(header.size()));
  return f;
}

void expect_format_error(const std::vector<uint8_t>& f, const std::string& needle) {
  try {
    st::parse(f);
    ADD_FAILURE() << "parsed, expected an error mentioning '" << needle << "'";
  } catch (const st::FormatError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
  }
}

TEST(Safetensors, RoundTripsThroughBytesAndFiles) {
  st::Contents c;
  c.tensors["a"] = {"F32", {2, 3}, std::vector<uint8_t>(24, 7)};
  c.tensors["b"] = {"I64", {}, std::vector<uint8_t>(8, 1)};
  c.tensors["empty"] = {"BOOL", {0, 4}, {}};
  c.metadata["format"] = "pt";
  const auto bytes = st::serialize(c);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u) << "data section aligned";
  const auto back = st::parse(bytes);
  ASSERT_EQ(back.tensors.size(), 3u);
  EXPECT_EQ(back.tensors.at("a").shape, (Shape{2, 3}));
  EXPECT_EQ(back.tensors.at("a").bytes, c.tensors["a"].bytes);
  EXPECT_EQ(back.tensors.at("b").shape, Shape{});
  EXPECT_EQ(back.metadata.at("format"), "pt");
  const auto path = (std::filesystem::temp_directory_path() / "wgtrain_st_roundtrip.safetensors").string();
  st::save(path, c);
  EXPECT_EQ(st::load(path).tensors.at("a").bytes, c.tensors["a"].bytes);
  std::filesystem::remove(path);
}

TEST(Safetensors, ConvertsDtypesToDeviceTensors) {
  auto& dev = test::device();
  auto arr = [](const char* dtype, Shape shape, std::vector<uint8_t> bytes) { return st::Array{dtype, shape, bytes}; };
  auto le = [](auto v) {
    std::vector<uint8_t> b(sizeof v);
    std::memcpy(b.data(), &v, sizeof v);
    return b;
  };
  EXPECT_EQ(st::to_tensor(dev, arr("F16", {1}, le(uint16_t{0x3c00})), "x").to_host_f32()[0], 1.0f);
  EXPECT_EQ(st::to_tensor(dev, arr("F16", {1}, le(uint16_t{0xc580})), "x").to_host_f32()[0], -5.5f);
  EXPECT_EQ(st::to_tensor(dev, arr("F16", {1}, le(uint16_t{0x0001})), "x").to_host_f32()[0], std::ldexp(1.0f, -24));
  EXPECT_EQ(st::to_tensor(dev, arr("BF16", {1}, le(uint16_t{0x4049})), "x").to_host_f32()[0],
            std::bit_cast<float>(0x40490000u));
  EXPECT_EQ(st::to_tensor(dev, arr("F64", {1}, le(2.5)), "x").to_host_f32()[0], 2.5f);
  EXPECT_EQ(st::to_tensor(dev, arr("I64", {1}, le(int64_t{-123456789})), "x").to_host_i32()[0], -123456789);
  EXPECT_THROW(st::to_tensor(dev, arr("I64", {1}, le(int64_t{1} << 40)), "x"), st::FormatError);
  EXPECT_EQ(st::to_tensor(dev, arr("I8", {1}, {0xff}), "x").to_host_i32()[0], -1);
  EXPECT_EQ(st::to_tensor(dev, arr("U8", {1}, {0xff}), "x").to_host_i32()[0], 255);
  const Tensor b = st::to_tensor(dev, arr("BOOL", {3}, {0, 1, 2}), "x");
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_EQ(b.to_host_i32(), (std::vector<int32_t>{0, 1, 1}));
  EXPECT_EQ(st::from_tensor(b).bytes, (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_THROW(st::to_tensor(dev, arr("U32", {1}, le(uint32_t{1})), "x"), st::FormatError);
}

TEST(Safetensors, RejectsMalformedFiles) {
  const std::string good = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_NO_THROW(st::parse(file_of(good, std::vector<uint8_t>(8))));
  expect_format_error({1, 2, 3}, "too short");
  std::vector<uint8_t> huge(16, 0);
  huge[5] = 1;  // header length 2^40
  expect_format_error(huge, "exceeds the limit");
  auto longer = file_of(good, std::vector<uint8_t>(8));
  longer[0] = static_cast<uint8_t>(longer.size());  // claims more header than the file holds
  expect_format_error(longer, "longer than");
  expect_format_error(file_of("{\"x\": [1,", {}), "not valid JSON");
  expect_format_error(file_of("[1, 2]", {}), "not a JSON object");
  expect_format_error(file_of(good, std::vector<uint8_t>(4)), "truncated");
  expect_format_error(file_of(good, std::vector<uint8_t>(12)), "belong to no tensor");
  expect_format_error(file_of(R"({"x":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", std::vector<uint8_t>(8)),
                      "unknown dtype");
  expect_format_error(file_of(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::vector<uint8_t>(8)),
                      "non-negative");
  expect_format_error(file_of(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::vector<uint8_t>(8)),
                      "need 12");
  expect_format_error(file_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", std::vector<uint8_t>(8)),
                      "reversed");
  expect_format_error(file_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                              std::vector<uint8_t>(12)),
                      "overlaps");
  expect_format_error(file_of(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::vector<uint8_t>(8)),
                      "gap");
  expect_format_error(file_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})",
                              std::vector<uint8_t>(8)),
                      "unknown field");
  expect_format_error(file_of(R"({"__metadata__":{"a":1}})", {}), "not a string");
  expect_format_error(file_of(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],)"
                              R"("data_offsets":[0,8]}})",
                              std::vector<uint8_t>(8)),
                      "too many elements");
  expect_format_error(file_of("{\"x\": \"\xff\xfe\"}", {}), "not valid JSON");
}

TEST(Safetensors, ReplaysTheFuzzCorpus) {
  // Every input the fuzzer kept: parsing either succeeds or raises FormatError.
  const std::filesystem::path dir = WGTRAIN_SAFETENSORS_CORPUS;
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream f(e.path(), std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    try {
      st::parse(bytes);
    } catch (const st::FormatError&) {
    }
    ++files;
  }
  EXPECT_GT(files, 10);
}

}  // namespace
}  // namespace wgtrain

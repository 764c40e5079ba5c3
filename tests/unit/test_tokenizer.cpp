// Tokenizers: byte and SentencePiece round trips are exact; identities are
// content-based; bad tokenizer files get errors that name them.
#include "kiln/base/error.hpp"
#include "kiln/data/tokenizer.hpp"

#include "../support/scratch_dir.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace fs = std::filesystem;
using kiln::data::isValidUtf8;
using kiln::data::openTokenizer;

namespace {

fs::path scratch(const std::string& name) {
    const fs::path dir = kiln::test::processScratch("kiln-tok");
    fs::create_directories(dir);
    return dir / name;
}

// Pseudo-English with newlines and runs of spaces, enough to train on.
std::string corpus(std::size_t lines, unsigned seed) {
    const char* words[] = {"the", "pipeline", "node", "fails", "and", "training", "goes", "on", "replica", "layer",
                           "gradient", "batch", "über", "naïve", "日本"};
    std::mt19937 rng(seed);
    std::string text;
    for (std::size_t l = 0; l < lines; ++l) {
        for (int w = 0; w < 12; ++w) text += std::string(words[rng() % 15]) + (rng() % 7 == 0 ? "   " : " ");
        text += "\n";
    }
    return text;
}

}  // namespace

TEST(ByteTokenizer, RoundTripsAnyBytes) {
    const auto t = openTokenizer("bytes");
    EXPECT_EQ(t->info().vocabSize, 257u);
    EXPECT_EQ(t->info().eosId, 256u);
    std::string text = "h\xe9llo\n\x01\xff";
    std::vector<std::uint32_t> ids;
    t->encode(text, ids);
    ASSERT_EQ(ids.size(), text.size());
    EXPECT_EQ(t->decode(ids), text);
}

TEST(SentencePieceTokenizer, TrainsAndRoundTripsExactly) {
    const auto sample = scratch("sample.txt");
    std::ofstream(sample) << corpus(3000, 1);
    const std::string model = kiln::data::trainSentencePiece(sample.string(), 400, scratch("sp").string());
    const auto t = openTokenizer(model);
    // A soft limit: this small sample supports fewer pieces than asked for.
    EXPECT_LE(t->info().vocabSize, 400u);
    EXPECT_GT(t->info().vocabSize, 259u);  // 3 specials + 256 byte pieces + learned ones
    EXPECT_EQ(t->info().id.rfind("spm-", 0), 0u);
    EXPECT_EQ(t->info().legacyId.rfind("sentencepiece-", 0), 0u);
    const std::string text = "the  node fails\n\tand   training goes on: naïve 日本 ünseen ☃\n";
    std::vector<std::uint32_t> ids;
    t->encode(text, ids);
    for (auto id : ids) EXPECT_LT(id, t->info().vocabSize);
    EXPECT_EQ(t->decode(ids), text);
    // Same content at another path: same identity.
    fs::copy_file(model, scratch("copy.model"), fs::copy_options::overwrite_existing);
    EXPECT_EQ(openTokenizer(scratch("copy.model").string())->info().id, t->info().id);
}

// Pass criterion: the same tokenizer trained twice on the same text (in other
// directories, so the model files differ: they record their training paths)
// has one identity, so sources prepared with either accept the other.
TEST(SentencePieceTokenizer, IdentityIsTheContentNotTheFile) {
    const auto sample = scratch("again.txt");
    std::ofstream(sample) << corpus(3000, 1);
    fs::create_directories(scratch("a"));
    fs::create_directories(scratch("elsewhere/b"));
    const std::string first = kiln::data::trainSentencePiece(sample.string(), 400, scratch("a/tok").string());
    const std::string second = kiln::data::trainSentencePiece(sample.string(), 400, scratch("elsewhere/b/tok").string());
    std::ifstream fa(first, std::ios::binary), fb(second, std::ios::binary);
    const std::string bytesA((std::istreambuf_iterator<char>(fa)), {}), bytesB((std::istreambuf_iterator<char>(fb)), {});
    ASSERT_NE(bytesA, bytesB) << "the two model files should differ (they record their paths)";
    const auto a = openTokenizer(first), b = openTokenizer(second);
    EXPECT_EQ(a->info().id, b->info().id);
    EXPECT_NE(a->info().legacyId, b->info().legacyId);
    EXPECT_TRUE(a->info().is(b->info().id));
    // Other pieces are another identity (this sample supports about 290 pieces and needs 282: ask for 286).
    const std::string smaller = kiln::data::trainSentencePiece(sample.string(), 286, scratch("a/small").string());
    ASSERT_LT(openTokenizer(smaller)->info().vocabSize, a->info().vocabSize);
    EXPECT_NE(openTokenizer(smaller)->info().id, a->info().id);
}

TEST(Tokenizer, MissingOrBogusModelNamesTheFile) {
    try {
        openTokenizer("/no/such.model");
        FAIL();
    } catch (const kiln::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("/no/such.model"), std::string::npos);
    }
    const auto bogus = scratch("bogus.model");
    std::ofstream(bogus) << "not a model";
    try {
        openTokenizer(bogus.string());
        FAIL();
    } catch (const kiln::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("is not a SentencePiece model"), std::string::npos) << e.what();
    }
}

TEST(Utf8, Validates) {
    EXPECT_TRUE(isValidUtf8("plain ascii"));
    EXPECT_TRUE(isValidUtf8("naïve 日本 ☃ \xf0\x9f\x98\x80"));
    EXPECT_FALSE(isValidUtf8("latin1 \xe9t\xe9"));
    EXPECT_FALSE(isValidUtf8("\xc0\xaf"));          // overlong '/'
    EXPECT_FALSE(isValidUtf8("\xed\xa0\x80"));      // surrogate
    EXPECT_FALSE(isValidUtf8("cut \xe6\x97"));      // truncated sequence
    EXPECT_FALSE(isValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
}

// Text fields of diag.h5's records have fixed sizes: what fits is kept
// whole, what does not is marked with the characters cut, never cut silently
// (a rank list of a large job was cut at 512 bytes without a sign).
#include "kiln/io/diag_file.hpp"

#include <gtest/gtest.h>

#include <string>

TEST(DiagText, FitsWhole) {
    char field[16];
    kiln::io::fitText(field, "0,1,2|3");
    EXPECT_EQ(std::string(field), "0,1,2|3");
    kiln::io::fitText(field, std::string(15, 'x'));
    EXPECT_EQ(std::string(field), std::string(15, 'x'));
}

TEST(DiagText, TooLongIsMarkedWithWhatWasCut) {
    char field[32];
    std::string ranks;
    for (int r = 0; r < 100; ++r) {
        if (r > 0) ranks += ',';
        ranks += std::to_string(r);
    }
    kiln::io::fitText(field, ranks);
    const std::string kept(field);
    EXPECT_EQ(kept.size(), 31u);
    const auto marker = kept.rfind("...[+");
    ASSERT_NE(marker, std::string::npos) << kept;
    EXPECT_EQ(kept.back(), ']');
    const auto cut = std::stoul(kept.substr(marker + 5, kept.size() - marker - 6));
    EXPECT_EQ(marker + cut, ranks.size()) << kept;  // the kept start and the count add up to the whole
    EXPECT_EQ(ranks.compare(0, marker, kept, 0, marker), 0);
}

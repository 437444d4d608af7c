// The results files and the Pareto front (results.hpp): what the workbench
// exports, the demo writes and `figure pareto` reads, without any widget.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "embedlab/error.hpp"
#include "embedlab/results.hpp"

using embedlab::RunSummary;

namespace {

RunSummary run(double ratio, double delta, double ppl = 50)
{
    RunSummary r;
    r.method = "pca";
    r.ratio = ratio;
    r.ppl = ppl;
    r.delta_ln_ppl = delta;
    return r;
}

// A results file's first seventeen columns (before the task columns), and one row of them.
constexpr const char* kSeventeenColumns =
    "method,parameters,params,ratio,ppl,delta_ln_ppl,cosine,seconds,host,part,"
    "params_before,ppl_original,eval_tokens,model,eval_text,kl_mean,"
    "top1_agreement";
constexpr const char* kSeventeenValues =
    "pca,rank 16,806272,0.1254,61.2,0.412,0.83,3.5,hostA,token_embedding,6432896,40.5,4095,m,t.txt,0.25,0.75";

// One row's token-embedding run, as the CSV and the JSON file each give it back.
RunSummary embedding_row(const char* method, const char* parameters)
{
    RunSummary r;
    r.method = method;
    r.parameters = parameters;
    r.part = "token_embedding";
    return r;
}

std::vector<std::vector<RunSummary>> read_back_both(const RunSummary& r)
{
    return {embedlab::results_from_csv(embedlab::results_csv({r})),
            embedlab::results_from_json(embedlab::results_json({r}))};
}

} // namespace

TEST(ParetoFront, KeepsTheRowsNoOtherRowBeatsOnBothByAscendingRatio)
{
    EXPECT_TRUE(embedlab::pareto_front({}).empty());
    EXPECT_EQ(embedlab::pareto_front({run(0.4, 0.2)}), (std::vector<int>{0}));
    // Row 2 is beaten by row 1 on both; row 4 repeats row 3's loss at a larger ratio.
    const std::vector<RunSummary> rows{run(0.5, 0.1), run(0.2, 0.3), run(0.3, 0.4),
                                       run(0.1, 0.5), run(0.6, 0.1), run(0.05, 0.9)};
    EXPECT_EQ(embedlab::pareto_front(rows), (std::vector<int>{5, 3, 1, 0}));
}

TEST(ParetoFront, TiesAndRowsWithoutANumber)
{
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    using V = std::vector<int>;
    // Same ratio: only the lower loss. Exact duplicates: both, in row order.
    EXPECT_EQ(embedlab::pareto_front({run(0.3, 0.2), run(0.3, 0.1)}), V{1});
    EXPECT_EQ(embedlab::pareto_front({run(0.3, 0.2), run(0.3, 0.2), run(0.5, 0.2)}), (V{0, 1}));
    // Same loss: only the smaller ratio.
    EXPECT_EQ(embedlab::pareto_front({run(0.6, 0.2), run(0.4, 0.2)}), V{1});
    // A failed evaluation would dominate everything if it were compared.
    EXPECT_EQ(embedlab::pareto_front(
                  {run(0.3, 0.2), run(0.01, -5, nan), run(0.02, nan), run(nan, -1), run(0.5, -inf)}),
              V{0});
    EXPECT_TRUE(embedlab::pareto_front({run(0.3, 0.2, nan)}).empty());
}

TEST(ResultsFiles, EveryFieldRoundTripsThroughCsvAndJson)
{
    RunSummary r;
    r.method = "tt";
    r.parameters = "shape 4x4x8, eps 0.3, ranks 1,4,6,1"; // commas: quoted
    r.part = "token_embedding";
    r.params_before = 6432896;
    r.params_after = 2211308;
    r.ratio = 0.1 + 0.2; // full precision survives
    r.ppl_original = 41.5;
    r.ppl = 48.25;
    r.delta_ln_ppl = std::log(48.25 / 41.5);
    r.mean_cosine = std::numeric_limits<double>::quiet_NaN(); // missing stays missing
    r.seconds = 7.25;
    r.eval_tokens = 4095;
    r.host = "host \"B\"\nsecond line"; // quotes and a newline: quoted
    r.model = "/models/tiny gpt2";
    r.eval_text = "/texts/a,b.txt";
    r.kl_mean = 0.0223; // top1_agreement stays NaN: not measured
    for (const auto& back : {embedlab::results_from_csv(embedlab::results_csv({r, r})),
                             embedlab::results_from_json(embedlab::results_json({r, r}))}) {
        ASSERT_EQ(back.size(), 2u);
        const auto& b = back[1];
        // Every field (NaN as null): the row read back has the original's summary JSON.
        EXPECT_EQ(embedlab::summary_json(b).dump(), embedlab::summary_json(r).dump());
        EXPECT_EQ(b.ratio, r.ratio);
        EXPECT_TRUE(std::isnan(b.mean_cosine));
        EXPECT_TRUE(std::isnan(b.top1_agreement));
    }
    // The run summary's own JSON (what a worker job reports) round-trips too.
    const auto back = embedlab::summary_from_json(embedlab::summary_json(r));
    EXPECT_EQ(back.parameters, r.parameters);
    EXPECT_EQ(back.kl_mean, r.kl_mean);
    EXPECT_TRUE(std::isnan(back.mean_cosine));
    EXPECT_THROW(embedlab::summary_from_json({{"method", "pca"}}), embedlab::InputError);
}

TEST(ResultsFiles, OlderNineColumnExportsReadAndGarbageIsRefused)
{
    const std::string old = "method,parameters,params,ratio,ppl,delta_ln_ppl,cosine,seconds,host\n"
                            "pca,rank 16,806272,0.1254,61.2,0.412,0.83,3.5,hostA\n";
    const auto rows = embedlab::results_from_csv(old);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].params_after, 806272);
    EXPECT_DOUBLE_EQ(rows[0].delta_ln_ppl, 0.412);
    EXPECT_TRUE(std::isnan(rows[0].ppl_original));
    // Fifteen columns: before the divergence columns.
    const std::string fifteen = "method,parameters,params,ratio,ppl,delta_ln_ppl,cosine,seconds,host,part,"
                                "params_before,ppl_original,eval_tokens,model,eval_text\n"
                                "pca,rank 16,806272,0.1254,61.2,0.412,0.83,3.5,hostA,token_embedding,"
                                "6432896,40.5,4095,m,t.txt\n";
    const auto rows15 = embedlab::results_from_csv(fifteen);
    ASSERT_EQ(rows15.size(), 1u);
    EXPECT_EQ(rows15[0].part, "token_embedding");
    EXPECT_EQ(rows15[0].eval_text, "t.txt");
    EXPECT_DOUBLE_EQ(rows15[0].ppl_original, 40.5);
    EXPECT_TRUE(std::isnan(rows15[0].kl_mean));
    EXPECT_THROW(embedlab::results_from_csv("a,b\n1,2\n"), embedlab::InputError);
    EXPECT_THROW(embedlab::results_from_json("{\"rows\": []}"), embedlab::InputError);
    EXPECT_THROW(embedlab::results_from_json("not json"), embedlab::InputError);
}

// Issue 19 item 5: the task columns in both files and the summary's JSON; the
// per-window divergence in the JSON forms (arrays), not in the CSV file.
TEST(ResultsFiles, TaskColumnsAndWindowArraysRoundTrip)
{
    RunSummary r = embedding_row("pca", "rank 16");
    r.kl_mean = 0.5;
    r.window_kl = {0.25, 0.75};
    r.window_top1 = {0.5, 0.625};
    r.task = "sst2";
    r.task_accuracy = 0.515;
    r.task_accuracy_original = 0.53;
    r.task_n = 200;
    r.bits_per_byte = 1.5, r.bits_per_byte_original = 1.25; // issue 60
    const auto csv = embedlab::results_csv({r});
    EXPECT_NE(csv.find("task,task_accuracy,task_accuracy_original,task_n,bytes_before,bytes_after,model_"
                       "bytes_before,model_bytes_after,bits_per_byte,bits_per_byte_original\n"),
              std::string::npos)
        << csv;
    for (const auto& back : read_back_both(r)) {
        ASSERT_EQ(back.size(), 1u);
        EXPECT_EQ(back[0].task, "sst2");
        EXPECT_EQ(back[0].bits_per_byte, 1.5);
        EXPECT_EQ(back[0].bits_per_byte_original, 1.25);
        EXPECT_EQ(back[0].task_accuracy, 0.515);
        EXPECT_EQ(back[0].task_accuracy_original, 0.53);
        EXPECT_EQ(back[0].task_n, 200);
        EXPECT_EQ(back[0].kl_mean, 0.5);
    }
    EXPECT_TRUE(embedlab::results_from_csv(csv)[0].window_kl.empty());
    EXPECT_EQ(embedlab::results_from_json(embedlab::results_json({r}))[0].window_kl, r.window_kl);
    const auto back = embedlab::summary_from_json(embedlab::summary_json(r));
    EXPECT_EQ(back.window_top1, r.window_top1);
    EXPECT_EQ(back.task, "sst2");
    EXPECT_EQ(back.task_accuracy_original, 0.53);
    // Seventeen columns (before the task columns) still read, without a task.
    const auto rows17 =
        embedlab::results_from_csv(std::string(kSeventeenColumns) + "\n" + kSeventeenValues + "\n");
    ASSERT_EQ(rows17.size(), 1u);
    EXPECT_EQ(rows17[0].top1_agreement, 0.75);
    EXPECT_TRUE(rows17[0].task.empty());
    EXPECT_TRUE(std::isnan(rows17[0].task_accuracy));
}

// Issue 38 item 4: the bytes a row's compressed part takes, before and after, in both
// files and the summary; files written before the bytes columns read without them.
TEST(ResultsFiles, BytesColumnsRoundTrip)
{
    RunSummary r = embedding_row("quant", "type q4_0");
    r.bytes_before = 16384000;
    r.bytes_after = 2304000;
    r.model_bytes_before = 29000000;
    r.model_bytes_after = 14920000;
    for (const auto& back : read_back_both(r)) {
        ASSERT_EQ(back.size(), 1u);
        EXPECT_EQ(back[0].bytes_before, 16384000);
        EXPECT_EQ(back[0].bytes_after, 2304000);
        EXPECT_EQ(back[0].model_bytes_before, 29000000);
        EXPECT_EQ(back[0].model_bytes_after, 14920000);
    }
    EXPECT_EQ(embedlab::summary_from_json(embedlab::summary_json(r)).bytes_after, 2304000);
    RunSummary unknown; // a mixed-dtype model: null in JSON, empty in CSV, NaN back
    unknown.method = "pca";
    EXPECT_TRUE(embedlab::summary_json(unknown)["bytes_after"].is_null());
    EXPECT_TRUE(std::isnan(embedlab::results_from_csv(embedlab::results_csv({unknown}))[0].bytes_after));
    // Twenty-one columns (before the bytes columns).
    const auto rows21 = embedlab::results_from_csv(std::string(kSeventeenColumns) +
                                                   ",task,task_accuracy,task_accuracy_original,task_n\n" +
                                                   kSeventeenValues + ",sst2,0.5,0.52,20\n");
    ASSERT_EQ(rows21.size(), 1u);
    EXPECT_EQ(rows21[0].task_n, 20);
    EXPECT_TRUE(std::isnan(rows21[0].bytes_after));
    // Twenty-three (before the model bytes columns).
    const auto rows23 = embedlab::results_from_csv(
        std::string(kSeventeenColumns) +
        ",task,task_accuracy,task_accuracy_original,task_n,bytes_before,bytes_after\n" + kSeventeenValues +
        ",sst2,0.5,0.52,20,16384000,2304000\n");
    ASSERT_EQ(rows23.size(), 1u);
    EXPECT_EQ(rows23[0].bytes_after, 2304000);
    EXPECT_TRUE(std::isnan(rows23[0].model_bytes_after));
}

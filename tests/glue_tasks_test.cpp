// GLUE's classification tasks beside SST-2 (issue 42): each task's own TSV layout read
// (tests/data/glue_formats: hand-written rows in GLUE's columns), refusals naming the
// file and line, a classifier's predictions and metrics on a pair task equal to its head
// run by hand, Matthews' correlation, id2label matching, and fine-tuning on pairs.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "embedlab/classifier_finetune.hpp"
#include "embedlab/encoder.hpp"
#include "embedlab/tasks.hpp"
#include "eval/classifier_task.hpp"
#include "test_support.hpp"

using namespace embedlab;
namespace fs = std::filesystem;

namespace {

fs::path glue_file(const std::string& task)
{
    return fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/glue_formats" / (task + ".tsv");
}

fs::path encoders()
{
    return fs::path(EMBEDLAB_SOURCE_DIR) / "tests/data/encoders";
}

std::vector<std::string> label_names(const TaskData& d)
{
    std::vector<std::string> out;
    for (const auto& c : d.examples.front().continuations)
        out.push_back(c.substr(1));
    return out;
}

fs::path write(const fs::path& p, const std::string& text)
{
    std::ofstream(p, std::ios::binary) << text;
    return p;
}

// bert-cls with the default labels LABEL_0, LABEL_1 (matched by position).
LanguageModel positional_classifier(const LanguageModel& m)
{
    ModelConfig c = m.config();
    c.labels = {"LABEL_0", "LABEL_1"};
    return LanguageModel(c, m.weights(), "positional");
}

} // namespace

TEST(GlueTasks, EachTaskIsReadFromItsOwnLayout)
{
    struct Case {
        std::string task;
        size_t n;
        std::vector<std::string> labels;
        std::vector<int64_t> gold;
        std::string first_text, first_pair;
    };
    const std::vector<Case> cases{
        {"cola", 6, {"unacceptable", "acceptable"}, {1, 0, 1, 0, 1, 0}, "The cat sat on the mat.", ""},
        {"mrpc",
         5,
         {"not_equivalent", "equivalent"},
         {1, 0, 1, 0, 1},
         "The company reported higher profits.",
         "Profits at the company rose."},
        {"qqp",
         3,
         {"not_duplicate", "duplicate"},
         {1, 0, 1},
         "How do I learn \"C++\" fast?",
         "What is the quickest way to learn C++?"},
        {"mnli",
         3,
         {"entailment", "neutral", "contradiction"},
         {0, 1, 2},
         "A man plays a guitar on stage.",
         "A man is playing music."},
        {"mnli-mm",
         3,
         {"entailment", "neutral", "contradiction"},
         {0, 1, 2},
         "A man plays a guitar on stage.",
         "A man is playing music."},
        {"qnli",
         2,
         {"entailment", "not_entailment"},
         {0, 1},
         "Where is the Eiffel Tower?",
         "The Eiffel Tower is in Paris."},
        {"rte",
         4,
         {"entailment", "not_entailment"},
         {0, 1, 0, 1},
         "The dog chased the ball across the yard.",
         "The dog ran."},
        {"wnli",
         2,
         {"not_entailment", "entailment"},
         {1, 0},
         "The trophy did not fit in the case because it was too big.",
         "The trophy was too big."},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.task);
        EXPECT_TRUE(is_classification_task(c.task));
        const auto d = read_task_data(c.task, glue_file(c.task == "mnli-mm" ? "mnli" : c.task));
        EXPECT_EQ(d.task, c.task);
        ASSERT_EQ(d.examples.size(), c.n);
        EXPECT_EQ(label_names(d), c.labels);
        std::vector<int64_t> gold;
        for (const auto& e : d.examples)
            gold.push_back(e.label);
        EXPECT_EQ(gold, c.gold);
        EXPECT_EQ(d.examples.front().text, c.first_text);
        EXPECT_EQ(d.examples.front().text_pair, c.first_pair);
        EXPECT_TRUE(d.examples.front().context.empty()); // only a classifier's head reads them
    }
    // The quote inside a CoLA sentence stays (tabs alone split); --limit counts rows.
    EXPECT_EQ(read_task_data("cola", glue_file("cola")).examples[2].text, "She said \"hello\" twice.");
    EXPECT_EQ(read_task_data("rte", glue_file("rte"), {.limit = 3}).examples.size(), 3u);
    // The LLE paper's coverage counts a pair's two texts.
    EXPECT_EQ(task_texts("rte", glue_file("rte")).front(),
              "The dog chased the ball across the yard. The dog ran.");
    EXPECT_FALSE(is_known_task("sts-b"));
}

TEST(GlueTasks, BadFilesAreRefusedNamingTheFileAndLine)
{
    test::TempDir tmp;
    test::expect_input_error(
        [&] { read_task_data("rte", write(tmp / "a.tsv", "index\ts1\ts2\tlabel\n0\ta\tb\tentailment\n")); },
        "a.tsv: the header has no 'sentence1' column (it has: index, s1, s2, label)");
    test::expect_input_error(
        [&] {
            read_task_data("rte",
                           write(tmp / "b.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n"));
        },
        "b.tsv:2: label 'maybe' is not one of rte's (entailment, not_entailment)");
    test::expect_input_error(
        [&] {
            read_task_data("wnli", write(tmp / "c.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\t2\n"));
        },
        "c.tsv:2: label '2' is not one of wnli's (0 to 1: not_entailment, entailment)");
    test::expect_input_error([&] { read_task_data("cola", write(tmp / "d.tsv", "src\t1\tThe cat sat.\n")); },
                             "d.tsv:1: 3 fields; CoLA's rows have 4");
    test::expect_input_error([&] { read_task_data("mrpc", write(tmp / "e.tsv", "")); },
                             "e.tsv: the file is empty");
    test::expect_input_error(
        [&] {
            read_task_data("mrpc",
                           write(tmp / "f.tsv",
                                 "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta\tb\n0\t3\ta\tb\n"));
        },
        "f.tsv:3: 4 fields, the header has 5");
    test::expect_input_error([&] { read_task_data("sts", glue_file("rte")); }, "unknown task 'sts'");
}

TEST(GlueTasks, MatthewsCorrelationAsScikitLearn)
{
    // tp 3, fp 1, fn 2, tn 4: (3 4 - 1 2) / sqrt(4 5 5 6) = 10 / sqrt(600)
    EXPECT_NEAR(embedlab::detail::binary_mcc(3, 1, 2, 4), 10.0 / std::sqrt(600.0), 1e-12);
    EXPECT_NEAR(embedlab::detail::binary_mcc(5, 0, 0, 5), 1.0, 1e-12);
    EXPECT_NEAR(embedlab::detail::binary_mcc(0, 5, 5, 0), -1.0, 1e-12);
    EXPECT_EQ(embedlab::detail::binary_mcc(6, 4, 0, 0), 0.0); // every prediction positive: undefined, 0
}

TEST(GlueTasks, F1OfLabelOneAsScikitLearn)
{
    // gold 1 1 1 1 1 0 0 0 0 0, predicted 1 1 1 0 0 1 0 0 0 0: tp 3, fp 1, fn 2;
    // precision 3/4, recall 3/5, F1 = 2 (3/4)(3/5) / (3/4 + 3/5) = 2/3
    EXPECT_NEAR(embedlab::detail::binary_f1(3, 1, 2), 2.0 / 3.0, 1e-12);
    EXPECT_NEAR(embedlab::detail::binary_f1(1, 0, 3), 0.4, 1e-12); // precision 1, recall 1/4
    EXPECT_EQ(embedlab::detail::binary_f1(0, 2, 3), 0.0);          // no true positive: 0
}

// mrpc on bert-cls (labels by position): the predictions are the head's argmax over the
// pairs framed by hand, and accuracy and F1 follow from them.
TEST(GlueTasks, ClassifierOnPairsIsItsHeadRunByHand)
{
    const auto lm = load_model(encoders() / "bert-cls");
    const auto model = positional_classifier(*lm.model);
    const auto data = read_task_data("mrpc", glue_file("mrpc"));
    const auto r = evaluate_task(model, *lm.tokenizer, data);
    std::vector<std::string> a, b;
    for (const auto& e : data.examples) {
        a.push_back(e.text);
        b.push_back(e.text_pair);
    }
    const auto batch = frame_texts(*lm.tokenizer, model.config(), a, &b);
    EXPECT_TRUE((batch.token_types == 1).any().item<bool>()); // the second text is segment 1
    const auto predicted = model.classify(batch_hidden_states(model, batch)).argmax(-1);
    int64_t right = 0, tp = 0, fp = 0, fn = 0;
    for (size_t i = 0; i < data.examples.size(); ++i) {
        const int64_t p = predicted[static_cast<int64_t>(i)].item<int64_t>(), g = data.examples[i].label;
        EXPECT_EQ(r.examples[i].choice, p) << i;
        right += p == g;
        tp += p == 1 && g == 1;
        fp += p == 1 && g == 0;
        fn += p == 0 && g == 1;
    }
    EXPECT_DOUBLE_EQ(r.accuracy, static_cast<double>(right) / 5.0);
    EXPECT_DOUBLE_EQ(r.f1, tp == 0 ? 0.0 : 2.0 * tp / static_cast<double>(2 * tp + fp + fn));
    EXPECT_TRUE(std::isnan(r.mcc));
    const auto j = task_json(r);
    EXPECT_TRUE(j.contains("f1"));
    EXPECT_FALSE(j.contains("mcc"));
    EXPECT_EQ(j["metric"], "f1"); // GLUE's headline for mrpc, accuracy beside it
    EXPECT_EQ(j["metric_value"].get<double>(), r.f1);
    EXPECT_NE(r.protocol.find("[CLS] a [SEP] b [SEP]"), std::string::npos);
    // cola reports Matthews' correlation.
    const auto cola = evaluate_task(model, *lm.tokenizer, read_task_data("cola", glue_file("cola")));
    EXPECT_FALSE(std::isnan(cola.mcc));
    EXPECT_TRUE(task_json(cola).contains("mcc"));
    EXPECT_EQ(task_json(cola)["metric"], "mcc");
    EXPECT_EQ(task_json(cola)["metric_value"].get<double>(), cola.mcc);
    // rte's headline is accuracy, and it has neither mcc nor f1.
    const auto rte = evaluate_task(model, *lm.tokenizer, read_task_data("rte", glue_file("rte")));
    EXPECT_EQ(task_json(rte)["metric"], "accuracy");
    EXPECT_FALSE(task_json(rte).contains("f1"));
}

TEST(GlueTasks, LabelsThatDoNotMatchTheModelAreRefused)
{
    const auto lm = load_model(encoders() / "bert-cls"); // id2label negative, positive
    test::expect_input_error(
        [&] { evaluate_task(*lm.model, *lm.tokenizer, read_task_data("rte", glue_file("rte"))); },
        "the task's label 'entailment' is none of the model's labels (negative, positive, from id2label)");
    test::expect_input_error(
        [&] { evaluate_task(*lm.model, *lm.tokenizer, read_task_data("mnli", glue_file("mnli"))); },
        "the task has 3 labels but the model's classifier has 2 (negative, positive)");
    // A model without a classifier head: cola is not a log-likelihood task.
    const auto body = load_model(encoders() / "minilm-st");
    test::expect_input_error(
        [&] { evaluate_task(*body.model, *body.tokenizer, read_task_data("cola", glue_file("cola"))); },
        "cola is scored by a sequence classifier's head, and bert has none");
}

// finetune --task rte: pairs framed as pairs, the head named by the task's labels, and
// the task reads the trained classifier back by those names.
TEST(GlueTasks, FineTuningOnPairsNamesTheHeadByTheTasksLabels)
{
    const auto lm = load_model(encoders() / "distilbert-mlm");
    const auto data = labelled_texts(read_task_data("rte", glue_file("rte")));
    ASSERT_EQ(data.pairs.size(), data.texts.size());
    EXPECT_EQ(data.label_names, (std::vector<std::string>{"entailment", "not_entailment"}));
    auto model = with_classification_head(*lm.model, data.label_names, 1);
    const auto r = train_classifier(*model, *lm.tokenizer, data, {.steps = 20, .batch = 4, .lr = 1e-2});
    const auto& c = r.loss_curve;
    EXPECT_LT(c[15] + c[16] + c[17] + c[18] + c[19], c[0] + c[1] + c[2] + c[3] + c[4]);
    const auto dev = evaluate_task(*model, *lm.tokenizer, read_task_data("rte", glue_file("rte")));
    EXPECT_EQ(dev.n, 4);
    EXPECT_GE(dev.accuracy, 0.75); // 20 steps on its own 4 pairs
    test::expect_input_error([&] { labelled_texts(read_task_data("mc", glue_file("rte"))); },
                             "not a JSON object");
}

// finetune --task stsb: a regression head (one output, LABEL_0) trained by MSE on the
// pairs' scores, and evaluate_similarity then scores each pair by that head.
TEST(GlueTasks, StsbFineTunesARegressionHeadThatScoresThePairs)
{
    const auto lm = load_model(encoders() / "bert-cls");
    const auto pairs = read_sentence_pairs(glue_file("stsb"));
    const auto data = regression_pairs(pairs, "stsb.tsv");
    EXPECT_EQ(data.label_names, std::vector<std::string>{"LABEL_0"});
    EXPECT_EQ(data.targets.front(), 4.8);
    auto model = with_classification_head(*lm.model, data.label_names, 3);
    const auto r = train_classifier(*model, *lm.tokenizer, data, {.steps = 30, .batch = 6, .lr = 1e-2});
    const auto& c = r.loss_curve;
    EXPECT_LT(c[25] + c[26] + c[27] + c[28] + c[29], c[0] + c[1] + c[2] + c[3] + c[4]);
    const auto s = evaluate_similarity(*model, *lm.tokenizer, pairs);
    ASSERT_EQ(s.cosines.size(), pairs.size());
    for (size_t i = 0; i < pairs.size(); ++i) {
        const std::vector<std::string> a{pairs[i].first}, b{pairs[i].second};
        const auto batch = frame_texts(*lm.tokenizer, model->config(), a, &b);
        EXPECT_NEAR(s.cosines[i], model->classify(batch_hidden_states(*model, batch))[0][0].item<double>(),
                    1e-6);
    }
    EXPECT_NE(s.protocol.find("regression head"), std::string::npos);
    EXPECT_GT(s.spearman, 0.5); // 30 steps on its own six pairs
    // Targets on a two-label head are refused.
    auto two = with_classification_head(*lm.model, {"a", "b"}, 3);
    test::expect_input_error([&] { train_classifier(*two, *lm.tokenizer, data, {.steps = 1}); },
                             "a head of one output");
}

// Issue 57 item 10: an STS-B gold score of 1e30 reached fine-tuning as an overflowing loss
// and was reported as "lower the learning rate"; it is the file's line that is wrong.
TEST(GlueTasks, StsbScoresOutsideTheScaleNameTheirLine)
{
    test::TempDir tmp;
    std::ofstream(tmp / "stsb.tsv") << "sentence1\tsentence2\tscore\n"
                                       "A man plays.\tA man plays a guitar.\t3.5\n"
                                       "A dog runs.\tA cat sleeps.\t1e30\n";
    test::expect_input_error([&] { read_sentence_pairs(tmp / "stsb.tsv"); },
                             "stsb.tsv:3: score 1e30 is outside STS-B's 0..5 scale");
}

// GLUE's classification tasks beside SST-2 (issue 42): each task's own TSV layout read
// (tests/data/glue_formats: hand-written rows in GLUE's columns), refusals naming the
// file and line, a classifier's predictions and metrics on a pair task equal to its head
// run by hand, Matthews' correlation, id2label matching, and fine-tuning on pairs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <set>

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

fs::path glue_encoders()
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
    const auto lm = load_model(glue_encoders() / "bert-cls");
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
    const auto lm = load_model(glue_encoders() / "bert-cls"); // id2label negative, positive
    test::expect_input_error(
        [&] { evaluate_task(*lm.model, *lm.tokenizer, read_task_data("rte", glue_file("rte"))); },
        "the task's label 'entailment' is none of the model's labels (negative, positive, from id2label)");
    test::expect_input_error(
        [&] { evaluate_task(*lm.model, *lm.tokenizer, read_task_data("mnli", glue_file("mnli"))); },
        "the task has 3 labels but the model's classifier has 2 (negative, positive)");
    // A model without a classifier head: cola is not a log-likelihood task.
    const auto body = load_model(glue_encoders() / "minilm-st");
    test::expect_input_error(
        [&] { evaluate_task(*body.model, *body.tokenizer, read_task_data("cola", glue_file("cola"))); },
        "cola is scored by a sequence classifier's head, and bert has none");
}

// finetune --task rte: pairs framed as pairs, the head named by the task's labels, and
// the task reads the trained classifier back by those names.
TEST(GlueTasks, FineTuningOnPairsNamesTheHeadByTheTasksLabels)
{
    const auto lm = load_model(glue_encoders() / "distilbert-mlm");
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
    const auto lm = load_model(glue_encoders() / "bert-cls");
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

// ---- Issue 62 item 6: the LLE paper's protocol (trials, the 10 % split, V_C from training) ----

namespace {

// An SST-2 file of n sentences over a small vocabulary (from the offset'th on), labels alternating.
fs::path synthetic_sst2(const fs::path& file, int n, int offset = 0)
{
    const char* words[] = {"good", "bad", "movie", "great", "film", "dull", "fun", "plot", "actor", "boring"};
    std::string text = "sentence\tlabel\n";
    for (int i = offset; i < offset + n; ++i) {
        std::string s;
        for (int w = 0; w < 3 + i % 4; ++w)
            s += std::string(w ? " " : "") + words[(i * 7 + w * 3) % 10];
        text += s + "\t" + std::to_string(i % 2) + "\n";
    }
    return write(file, text);
}

} // namespace

// Fisher-Yates from the top with std::mt19937_64(42), recomputed here, decides the split:
// ceil(10 %) held out, disjoint from the rest, together every index once; the same seed
// the same split, another seed another.
TEST(LleProtocol, ValidationSplitIsSeed42sShuffleAndDisjoint)
{
    for (const int64_t n : {20, 21, 600, 6920}) {
        const auto s = validation_split(n);
        EXPECT_EQ(s.seed, 42u);
        std::vector<int64_t> order(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
            order[static_cast<size_t>(i)] = i;
        std::mt19937_64 rng(42);
        for (int64_t i = n - 1; i > 0; --i)
            std::swap(order[static_cast<size_t>(i)], order[rng() % static_cast<uint64_t>(i + 1)]);
        const auto held = static_cast<size_t>((n + 9) / 10);
        std::vector<int64_t> expected(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(held));
        std::sort(expected.begin(), expected.end());
        EXPECT_EQ(s.validation, expected) << n;
        ASSERT_EQ(s.train.size() + s.validation.size(), static_cast<size_t>(n));
        std::vector<int64_t> all = s.train;
        all.insert(all.end(), s.validation.begin(), s.validation.end());
        std::sort(all.begin(), all.end());
        for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(all[static_cast<size_t>(i)], i) << "disjoint and complete";
        EXPECT_EQ(validation_split(n).validation, s.validation);
        EXPECT_NE(validation_split(n, 0.1, 43).validation, s.validation);
    }
    test::expect_input_error(
        [] { validation_split(2); },
        "holding out 1 of 2 training examples for validation leaves fewer than 2 to train on");
}

// Mean and the sample standard deviation, against the sum-of-squares form.
TEST(LleProtocol, MeanAndStdEqualAnIndependentRecount)
{
    const std::vector<double> v{0.9018, 0.8972, 0.9065};
    const auto m = mean_and_std(v);
    double sum = 0, squares = 0;
    for (const double x : v) {
        sum += x;
        squares += x * x;
    }
    const double mean = sum / 3;
    EXPECT_NEAR(m.mean, mean, 1e-15);
    EXPECT_NEAR(m.std, std::sqrt((squares - 3 * mean * mean) / 2), 1e-9);
    EXPECT_EQ(m.n, 3);
    EXPECT_EQ(mean_and_std({0.5}).std, 0.0);
    test::expect_input_error([] { mean_and_std({}); }, "a mean over trials needs at least one trial");
}

// V_C from the training examples: every sentence and its pair encoded alone, counted here
// with a map; r(V_C) = 1 keeps every id seen plus the specials, 0.5 the top half by count.
TEST(LleProtocol, CommonVocabularyFromTrainingTextEqualsARecount)
{
    const auto lm = load_model(glue_encoders() / "distilbert-mlm");
    const auto data = labelled_texts(read_task_data("rte", glue_file("rte")));
    std::map<int32_t, int64_t> counts;
    int64_t tokens = 0;
    for (size_t i = 0; i < data.texts.size(); ++i)
        for (const auto& text : {data.texts[i], data.pairs[i]})
            for (const int32_t id : lm.tokenizer->encode(text)) {
                ++counts[id];
                ++tokens;
            }
    const auto ids = training_token_ids(*lm.tokenizer, data);
    EXPECT_EQ(static_cast<int64_t>(ids.size()), tokens);
    const int64_t V = lm.model->config().vocab_size;
    const auto all = training_frequency_split(*lm.tokenizer, ids, V, 1.0);
    EXPECT_EQ(all.distinct_seen, static_cast<int64_t>(counts.size()));
    std::set<int64_t> expected;
    for (const auto& [id, c] : counts) {
        EXPECT_EQ(all.counts[static_cast<size_t>(id)], c);
        expected.insert(id);
    }
    for (int32_t id = 0; id < V; ++id)
        if (lm.tokenizer->is_special(id))
            expected.insert(id);
    EXPECT_EQ(std::set<int64_t>(all.common.begin(), all.common.end()), expected);
    // Half: the top ceil(0.5 seen) by count, ties to the lower id, plus the specials.
    std::vector<std::pair<int64_t, int32_t>> ranked; // (-count, id)
    for (const auto& [id, c] : counts)
        ranked.emplace_back(-c, id);
    std::sort(ranked.begin(), ranked.end());
    std::set<int64_t> half;
    for (size_t i = 0; i < (counts.size() + 1) / 2; ++i)
        half.insert(ranked[i].second);
    for (int32_t id = 0; id < V; ++id)
        if (lm.tokenizer->is_special(id))
            half.insert(id);
    const auto top = training_frequency_split(*lm.tokenizer, ids, V, 0.5);
    EXPECT_EQ(std::set<int64_t>(top.common.begin(), top.common.end()), half);
}

// The protocol in one call: three trials with seeds 7, 8, 9; the first trial's scores equal
// a classifier trained alone with seed 7 on the split's training side, compressed by lle
// with V_C from that side and scored; k is the candidate with the best mean validation score;
// the record's means and stds are those of its values.
TEST(LleProtocol, ThreeTrialsAndKChosenOnTheValidationSplit)
{
    test::TempDir tmp;
    const auto lm = load_model(glue_encoders() / "distilbert-mlm");
    const auto all = labelled_texts(read_task_data("sst2", synthetic_sst2(tmp / "train.tsv", 40)));
    const auto test = labelled_texts(read_task_data("sst2", synthetic_sst2(tmp / "test.tsv", 20, 40)));
    ClassifierProtocolOptions o{.train = {.steps = 6, .batch = 4, .lr = 1e-2, .seed = 7},
                                .trials = 3,
                                .select_k = true,
                                .settings = {{.method = "lle", .keep_ratio = 0.5, .ks = {1, 2, 3}},
                                             {.method = "lle-unk", .keep_ratio = 0.5, .ks = {0}}}};
    const auto r = run_classifier_protocol(*lm.model, *lm.tokenizer, all, test, o);
    EXPECT_EQ(r.seeds, (std::vector<uint64_t>{7, 8, 9}));
    ASSERT_TRUE(r.split);
    EXPECT_EQ(r.split->validation.size(), 4u);
    EXPECT_EQ(r.train_examples, 36);
    EXPECT_EQ(r.metric, "accuracy");

    // Trial 1 again, by hand.
    const auto fit = subset(all, r.split->train), validation = subset(all, r.split->validation);
    auto model = with_classification_head(*lm.model, fit.label_names, 7);
    auto options = o.train;
    train_classifier(*model, *lm.tokenizer, fit, options);
    EXPECT_EQ(score_classifier(*model, *lm.tokenizer, test).value, r.original.test[0]);
    EXPECT_EQ(score_classifier(*model, *lm.tokenizer, validation).value, r.original.validation[0]);
    const auto split = training_frequency_split(*lm.tokenizer, training_token_ids(*lm.tokenizer, fit),
                                                lm.model->config().vocab_size, 0.5);
    EXPECT_EQ(r.settings[0].common, static_cast<int64_t>(split.common.size()));
    const torch::Tensor table = *dense_table(&model->token_embedding());
    for (size_t ki = 0; ki < 3; ++ki) {
        auto e = std::make_shared<PartialSparseTokenEmbedding>(
            fit_partial_sparse(table, split, {.kind = PartialSparseKind::LLE, .k = o.settings[0].ks[ki]}));
        auto copy = LanguageModel(model->config(), model->weights(), "copy");
        copy.set_token_embedding(e);
        EXPECT_EQ(score_classifier(copy, *lm.tokenizer, validation).value,
                  r.settings[0].per_k[ki].validation[0]);
        EXPECT_EQ(score_classifier(copy, *lm.tokenizer, test).value, r.settings[0].per_k[ki].test[0]);
    }
    // k: the best mean validation score, the first of equals.
    size_t best = 0;
    for (size_t ki = 0; ki < 3; ++ki) {
        const auto& v = r.settings[0].per_k[ki].validation;
        ASSERT_EQ(v.size(), 3u);
        const auto& b = r.settings[0].per_k[best].validation;
        if ((v[0] + v[1] + v[2]) / 3 > (b[0] + b[1] + b[2]) / 3 + 1e-12)
            best = ki;
    }
    EXPECT_EQ(r.settings[0].chosen, best);
    const auto j = protocol_json(r);
    EXPECT_EQ(j["settings"][0]["k"], o.settings[0].ks[best]);
    EXPECT_EQ(j["seeds"], nlohmann::json({7, 8, 9}));
    const auto& t = j["settings"][0]["test"];
    const auto values = t["values"].get<std::vector<double>>();
    EXPECT_EQ(values, r.settings[0].per_k[best].test);
    const double mean = (values[0] + values[1] + values[2]) / 3;
    EXPECT_NEAR(t["mean"].get<double>(), mean, 1e-12);
    double sq = 0;
    for (const double v : values)
        sq += (v - mean) * (v - mean);
    EXPECT_NEAR(t["std"].get<double>(), std::sqrt(sq / 2), 1e-12);
    EXPECT_FALSE(j["settings"][1].contains("k")); // lle-unk has none

    // Refusals.
    auto bad = o;
    bad.trials = 0;
    test::expect_input_error([&] { run_classifier_protocol(*lm.model, *lm.tokenizer, all, test, bad); },
                             "--trials must be between 1 and 100 (the paper runs 3), got 0");
    bad = o;
    bad.settings[0].ks.clear();
    test::expect_input_error([&] { run_classifier_protocol(*lm.model, *lm.tokenizer, all, test, bad); },
                             "lle needs a k (--k K, or --k auto to choose it on the validation split)");
    const auto two =
        labelled_texts(read_task_data("sst2", write(tmp / "two.tsv", "sentence\tlabel\ngood\t1\nbad\t0\n")));
    test::expect_input_error(
        [&] { run_classifier_protocol(*lm.model, *lm.tokenizer, two, test, o); },
        "two.tsv: k is chosen on a validation split of the training data, and holding out 1 of 2 training "
        "examples for validation leaves fewer than 2 to train on");
}

#include "method_panel.hpp"

#include "checked_spin_box.hpp"

#include "embedlab/experiment_request.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QStackedWidget>
#include <QStandardItemModel>
#include <QVBoxLayout>

namespace embedlab::app {

namespace {

const QString kThisComputer = "This computer";
const QString kSlurm = "Slurm cluster"; // this machine is a login node (sbatch on PATH)

QSpinBox* spin(QWidget* parent, const QString& prefix, int lo, int hi, int value, const QString& tip)
{
    auto* s = new CheckedSpinBox(parent);
    s->setPrefix(prefix);
    s->setRange(lo, hi);
    s->setValue(value);
    s->setToolTip(tip);
    return s;
}

QDoubleSpinBox* real(QWidget* parent, const QString& prefix, double lo, double hi, double value,
                     const QString& tip)
{
    auto* s = new CheckedDoubleSpinBox(parent);
    s->setPrefix(prefix);
    s->setRange(lo, hi);
    s->setSingleStep(0.05);
    s->setDecimals(2);
    s->setValue(value);
    s->setToolTip(tip);
    return s;
}

QWidget* page(QWidget* parent, std::initializer_list<QWidget*> widgets)
{
    auto* w = new QWidget(parent);
    auto* layout = new QHBoxLayout(w);
    layout->setContentsMargins(0, 0, 0, 0);
    for (QWidget* child : widgets)
        layout->addWidget(child);
    layout->addStretch(1);
    return w;
}

} // namespace

QStringList MethodPanel::methods()
{
    return {"pca", "svd", "tt", "lle", "fourier", "flat"};
}

MethodPanel::MethodPanel(QWidget* parent)
    : QWidget(parent), method_(new QComboBox(this)), options_(new QStackedWidget(this)),
      rank_(spin(this, "rank k = ", 1, 1024, 32, "Kept rank; drag the Spectrum tab's marker to set it")),
      eps_(real(this, "eps = ", 0.01, 0.99, 0.3,
                "TT-SVD accuracy: per-row relative error bound; the shape is the most balanced of d")),
      keep_ratio_(real(this, "keep ", 0.01, 0.99, 0.5,
                       "Share of the vocabulary kept as common rows (most frequent in the frequency text)")),
      neighbours_(spin(this, "k = ", 1, 64, 8, "Common neighbours each rare row is rebuilt from (LLE)")),
      mlp_(new QComboBox(this)),
      steps_(spin(this, "", 1, 1000000, 300, "AdamW steps fitting the MLP to the table's rows")),
      remaining_(real(this, "remaining ", 0.05, 1.0, 0.5,
                      "Average remaining value rank ratio over the decoder layers (1 - sparsity)")),
      target_ratio_(real(this, "target ", 0.0, 1.0, 0.0,
                         "Instead of remaining: the share of the decoder's weights (Q, K, V, O, MLP) to "
                         "keep, as compute_rank.py; compresses the MLPs too unless 'dense MLP' (off: 0)")),
      no_mlp_(new QCheckBox("dense MLP", this)), allocation_(new QComboBox(this)),
      samples_(spin(this, "", 1, 4096, 32, "Calibration windows drawn (seeded) from the calibration text")),
      seqlen_(spin(this, "", 2, 8192, 128, "Tokens per calibration window")),
      lora_(new QCheckBox("+ LoRA recovery", this)), divergence_(new QCheckBox("+ KL vs original", this)),
      lora_rank_(spin(this, "r = ", 1, 1024, 8, "Adapter rank (alpha = 2 r)")),
      lora_steps_(spin(this, "", 1, 1000000, 100, "Training steps of 8 windows each")),
      target_(new QComboBox(this)), ssh_config_(new QLineEdit(this)), remote_cli_(new QLineEdit(this)),
      slurm_partition_(new QLineEdit(this)), slurm_time_(new QLineEdit(this)),
      slurm_array_limit_(spin(this, "", 0, 100000, 0, "Slurm array tasks running at once (--array=..%K)")),
      frequency_text_(new QLineEdit(this)), calibration_text_(new QLineEdit(this)),
      train_text_(new QLineEdit(this)), eval_text_(new QLineEdit(this)),
      eval_tokens_(spin(this, "first ", 0, 100000000, 4096,
                        "Perplexity on the evaluation text's first N tokens (all: every token)")),
      task_(new QComboBox(this)), task_data_(new QLineEdit(this)), task_file_row_(nullptr),
      task_limit_(spin(this, "first ", 0, 100000000, 200,
                       "Score the task's first N examples (all: every example); each is one forward pass "
                       "per choice, on the original once and on every compressed model")),
      run_(new QPushButton("Run", this)), problem_(new QLabel(this)), note_(new QLabel(this))
{
    rank_->setObjectName("rank");
    eps_->setObjectName("eps");
    method_->addItems(methods());
    method_->setToolTip("pca: centred low rank (METHODS 1); svd: uncentred; tt: per-token Tensor-Train (5);\n"
                        "lle: rare rows rebuilt from common neighbours (2); fourier: MLP of Fourier features "
                        "(4);\nflat: head-wise PCA of the attention values with IPRS ranks (3)");
    mlp_->addItems({"linear", "geglu"});
    mlp_->setToolTip("linear: d -> d (reference code); geglu: hidden d / 4 (the paper's small variant)");
    steps_->setSuffix(" steps");
    allocation_->addItems({"iprs", "uniform"});
    allocation_->setToolTip(
        "iprs: ranks by layer importance (Algorithm 1); uniform: the same ratio everywhere");
    samples_->setSuffix(" windows");
    seqlen_->setPrefix("of ");
    seqlen_->setSuffix(" tokens");
    lora_->setToolTip("Train LoRA adapters on the compressed model (next-token loss on the training text)");
    divergence_->setToolTip("Also measure KL(P_original || P_compressed) and top-1 agreement on the "
                            "evaluated tokens (the KL and top-1 columns; about twice the evaluation time)");
    lora_steps_->setSuffix(" steps");
    eval_tokens_->setSuffix(" tokens");
    eval_tokens_->setSpecialValueText("all tokens");
    target_->setEditable(true);
    target_->addItem(kThisComputer);
    target_->addItem(kSlurm);
    slurm_partition_->setPlaceholderText("partition (default)");
    slurm_partition_->setToolTip("sbatch --partition");
    slurm_time_->setPlaceholderText("time limit, e.g. 00:30:00");
    slurm_time_->setToolTip("sbatch --time");
    slurm_array_limit_->setSpecialValueText("no task limit");
    slurm_array_limit_->setPrefix("at most ");
    slurm_array_limit_->setSuffix(" at once");
    target_->setToolTip(
        "Where the job runs: this computer, or an ssh host ([user@]host[:port] or a name from\n"
        "the ssh config) with embedlab-cli installed (every method; see README, Remote), or a Slurm\n"
        "cluster whose login node this is (a job array task; see README, Sweeps on a Slurm cluster)");
    target_->setMinimumContentsLength(14);
    ssh_config_->setPlaceholderText("ssh config (default: ~/.ssh/config)");
    remote_cli_->setPlaceholderText("embedlab-cli");
    remote_cli_->setToolTip(
        "The worker on the host, when embedlab-cli is not on its PATH (remote run --remote-cli)");

    options_->addWidget(page(this, {rank_}));                    // pca, svd
    options_->addWidget(page(this, {eps_}));                     // tt
    options_->addWidget(page(this, {keep_ratio_, neighbours_})); // lle
    options_->addWidget(page(this, {mlp_, steps_}));             // fourier
    target_ratio_->setObjectName("target_ratio");
    target_ratio_->setSpecialValueText("no target");
    no_mlp_->setToolTip("With a target ratio: compress V and O only (--no-mlp)");
    options_->addWidget(
        page(this, {remaining_, target_ratio_, no_mlp_, allocation_, samples_, seqlen_})); // flat

    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel("Compress with", this));
    top->addWidget(method_);
    top->addWidget(options_, 1);
    top->addWidget(lora_);
    top->addWidget(lora_rank_);
    top->addWidget(lora_steps_);
    top->addWidget(divergence_);
    top->addWidget(new QLabel("on", this));
    top->addWidget(target_);
    top->addWidget(ssh_config_);
    top->addWidget(remote_cli_);
    top->addWidget(slurm_partition_);
    top->addWidget(slurm_time_);
    top->addWidget(slurm_array_limit_);
    top->addWidget(run_);
    problem_->setStyleSheet("color: #b00000;");
    problem_->setWordWrap(true);
    problem_->hide();

    const QString bundled = "the bundled sample text";
    frequency_row_ =
        textRow("Frequencies", frequency_text_, "Token counts that split common from rare (lle)");
    calibration_row_ =
        textRow("Calibration", calibration_text_, "Windows for importance and value covariances");
    train_row_ = textRow("Training", train_text_,
                         "LoRA training text; when it is the evaluation text, only the tokens after the "
                         "evaluated ones are trained on");
    auto* texts = new QHBoxLayout;
    texts->addWidget(frequency_row_);
    texts->addWidget(calibration_row_);
    texts->addWidget(train_row_);
    texts->addWidget(textRow("Evaluate on", eval_text_, "Perplexity text (METHODS 0)"));
    texts->addWidget(eval_tokens_);
    for (QLineEdit* e : {frequency_text_, calibration_text_, train_text_, eval_text_})
        e->setPlaceholderText(bundled);

    // A zero-shot task after the evaluation (tasks.hpp): the task accuracy column.
    task_->addItem("no task", "none");
    task_->addItem("SST-2 dev (GLUE)", "sst2-dev");
    task_->addItem("SST-2 file", "sst2");
    task_->addItem("multiple choice (JSONL)", "mc");
    task_->setToolTip(
        "Also score a zero-shot task on the compressed model and the original, by log-likelihood as\n"
        "lm-evaluation-harness does (the task acc column): SST-2 (a GLUE TSV with sentence and label)\n"
        "or multiple choice (JSONL lines {\"context\", \"choices\", \"label\"}, e.g. PIQA, ARC)");
    if (sst2DevPath().isEmpty()) {
        auto* item = qobject_cast<QStandardItemModel*>(task_->model())->item(1);
        item->setEnabled(false);
        item->setToolTip("../shared/data/glue/SST-2/dev.tsv not found; choose an SST-2 file");
    }
    task_data_->setPlaceholderText("task file");
    task_data_->setClearButtonEnabled(true);
    task_data_->setToolTip("The task's data file (SST-2: TSV; multiple choice: JSONL)");
    task_limit_->setSuffix(" examples");
    task_limit_->setSpecialValueText("all examples");
    task_file_row_ = new QWidget(this);
    {
        auto* row = new QHBoxLayout(task_file_row_);
        row->setContentsMargins(0, 0, 0, 0);
        auto* browse = new QPushButton("...", task_file_row_);
        browse->setMaximumWidth(28);
        browse->setToolTip("Choose the task's data file");
        connect(browse, &QPushButton::clicked, this, [this] {
            const QString file = QFileDialog::getOpenFileName(
                this, "Task data", task_data_->text(), "Task data (*.tsv *.jsonl *.json);;All files (*)");
            if (!file.isEmpty())
                task_data_->setText(file);
        });
        row->addWidget(task_data_, 1);
        row->addWidget(browse);
    }
    auto* task_row = new QHBoxLayout;
    task_row->addWidget(new QLabel("Task", this));
    task_row->addWidget(task_);
    task_row->addWidget(task_file_row_, 1);
    task_row->addWidget(task_limit_);
    task_row->addStretch(1);
    connect(task_, &QComboBox::currentIndexChanged, this, [this] { showOptionsFor(method()); });

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(top);
    layout->addLayout(texts);
    layout->addLayout(task_row);
    layout->addWidget(problem_);
    layout->addWidget(note_);
    note_->setStyleSheet("color: #8a5a00;");
    note_->setWordWrap(true);
    note_->hide();
    for (QLineEdit* e : {frequency_text_, eval_text_})
        connect(e, &QLineEdit::textChanged, this, &MethodPanel::showNotes);
    // An out-of-range number typed anywhere is said here at once, not at Run.
    for (QWidget* box : numberBoxes()) {
        if (auto* s = qobject_cast<CheckedSpinBox*>(box))
            connect(s, &CheckedSpinBox::problemChanged, this, &MethodPanel::showProblem);
        if (auto* d = qobject_cast<CheckedDoubleSpinBox*>(box))
            connect(d, &CheckedDoubleSpinBox::problemChanged, this, &MethodPanel::showProblem);
    }

    connect(method_, &QComboBox::currentTextChanged, this, &MethodPanel::showOptionsFor);
    connect(method_, &QComboBox::currentTextChanged, this, &MethodPanel::methodChanged);
    connect(lora_, &QCheckBox::toggled, this, [this] { showOptionsFor(method()); });
    connect(target_, &QComboBox::currentTextChanged, this, [this] { showOptionsFor(method()); });
    connect(run_, &QPushButton::clicked, this, &MethodPanel::run);
    restoreSettings();
    showOptionsFor(method_->currentText());
}

MethodPanel::~MethodPanel()
{
    saveSettings();
}

QWidget* MethodPanel::textRow(const QString& label, QLineEdit* edit, const QString& tooltip)
{
    auto* row = new QWidget(this);
    auto* layout = new QHBoxLayout(row);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* browse = new QPushButton("...", row);
    browse->setMaximumWidth(28);
    browse->setToolTip("Choose a UTF-8 text file");
    connect(browse, &QPushButton::clicked, this, [this, edit, label] {
        const QString file = QFileDialog::getOpenFileName(this, label + " text", edit->text(),
                                                          "Text files (*.txt);;All files (*)");
        if (!file.isEmpty())
            edit->setText(file);
    });
    edit->setToolTip(tooltip + " (empty: the bundled sample text)");
    edit->setClearButtonEnabled(true);
    layout->addWidget(new QLabel(label, row));
    layout->addWidget(edit, 1);
    layout->addWidget(browse);
    return row;
}

void MethodPanel::setDimension(int d)
{
    rank_->setRange(1, std::max(d, 1));
}

CompressionRequest MethodPanel::request() const
{
    CompressionRequest r;
    r.method = method().toStdString();
    r.rank = rank_->value();
    r.eps = eps_->value();
    r.keep_ratio = keep_ratio_->value();
    r.k = neighbours_->value();
    r.mlp = mlp_->currentText().toStdString();
    r.steps = steps_->value();
    r.remaining = remaining_->value();
    r.target_ratio = target_ratio_->value();
    r.no_mlp = r.target_ratio > 0 && no_mlp_->isChecked();
    r.allocation = allocation_->currentText().toStdString();
    r.samples = samples_->value();
    r.seqlen = seqlen_->value();
    r.lora_rank = lora_->isChecked() && method() != "flat" ? lora_rank_->value() : 0;
    r.lora_steps = lora_steps_->value();
    r.frequency_text = frequency_text_->text().trimmed().toStdString();
    r.calibration_text = calibration_text_->text().trimmed().toStdString();
    r.train_text = train_text_->text().trimmed().toStdString();
    r.eval_tokens = eval_tokens_->value();
    r.divergence = divergence_->isChecked();
    const QString task = task_->currentData().toString();
    if (task == "sst2-dev") {
        r.task = "sst2";
        r.task_data = sst2DevPath().toStdString();
    } else if (task == "sst2" || task == "mc") {
        r.task = task.toStdString();
        r.task_data = task_data_->text().trimmed().toStdString();
    }
    if (!r.task.empty())
        r.task_limit = task_limit_->value();
    const QString host = target_->currentText().trimmed();
    if (host == kSlurm) {
        r.slurm = true;
        r.slurm_partition = slurm_partition_->text().trimmed().toStdString();
        r.slurm_time = slurm_time_->text().trimmed().toStdString();
        r.slurm_array_limit = slurm_array_limit_->value();
    } else if (host != kThisComputer && !host.isEmpty()) {
        r.host = host.toStdString();
        r.ssh_config = ssh_config_->text().trimmed().toStdString();
        r.remote_cli = remote_cli_->text().trimmed().toStdString();
    }
    return r;
}

QString MethodPanel::evaluationText() const
{
    return eval_text_->text().trimmed();
}

void MethodPanel::setRequest(const CompressionRequest& r, const QString& evaluation_text)
{
    setMethod(QString::fromStdString(r.method));
    if (r.rank > 0)
        rank_->setValue(static_cast<int>(r.rank));
    if (r.eps > 0)
        eps_->setValue(r.eps);
    keep_ratio_->setValue(r.keep_ratio);
    neighbours_->setValue(static_cast<int>(r.k));
    mlp_->setCurrentText(QString::fromStdString(r.mlp));
    steps_->setValue(static_cast<int>(r.steps));
    remaining_->setValue(r.remaining);
    target_ratio_->setValue(r.target_ratio);
    no_mlp_->setChecked(r.no_mlp);
    allocation_->setCurrentText(QString::fromStdString(r.allocation));
    samples_->setValue(static_cast<int>(r.samples));
    seqlen_->setValue(static_cast<int>(r.seqlen));
    lora_->setChecked(r.lora_rank > 0);
    divergence_->setChecked(r.divergence);
    const QString task_data = QString::fromStdString(r.task_data);
    const bool dev = r.task == "sst2" && !task_data.isEmpty() && task_data == sst2DevPath();
    task_->setCurrentIndex(std::max(0, task_->findData(r.task.empty() ? QString("none")
                                                       : dev          ? QString("sst2-dev")
                                                                      : QString::fromStdString(r.task))));
    task_data_->setText(dev ? QString() : task_data);
    if (!r.task.empty())
        task_limit_->setValue(static_cast<int>(r.task_limit));
    if (r.lora_rank > 0)
        lora_rank_->setValue(static_cast<int>(r.lora_rank));
    lora_steps_->setValue(static_cast<int>(r.lora_steps));
    frequency_text_->setText(QString::fromStdString(r.frequency_text));
    calibration_text_->setText(QString::fromStdString(r.calibration_text));
    train_text_->setText(QString::fromStdString(r.train_text));
    eval_text_->setText(evaluation_text);
    eval_tokens_->setValue(static_cast<int>(r.eval_tokens));
    setHost(r.slurm ? kSlurm : QString::fromStdString(r.host));
    ssh_config_->setText(QString::fromStdString(r.ssh_config));
    remote_cli_->setText(QString::fromStdString(r.remote_cli));
    if (r.slurm) {
        slurm_partition_->setText(QString::fromStdString(r.slurm_partition));
        slurm_time_->setText(QString::fromStdString(r.slurm_time));
        slurm_array_limit_->setValue(r.slurm_array_limit);
    }
}

QString MethodPanel::sst2DevPath()
{
    return QString::fromStdString(sst2_dev_path());
}

QString MethodPanel::method() const
{
    return method_->currentText();
}
int MethodPanel::rank() const
{
    return rank_->value();
}
double MethodPanel::eps() const
{
    return eps_->value();
}
void MethodPanel::setMethod(const QString& method)
{
    method_->setCurrentText(method);
}
void MethodPanel::setRank(int k)
{
    rank_->setValue(k);
}
void MethodPanel::setEps(double eps)
{
    eps_->setValue(eps);
}

void MethodPanel::setHost(const QString& host)
{
    target_->setCurrentText(host.isEmpty() ? kThisComputer : host);
}

QList<QWidget*> MethodPanel::numberBoxes() const
{
    return {rank_,    eps_,    keep_ratio_, neighbours_, steps_,       remaining_, target_ratio_,
            samples_, seqlen_, lora_rank_,  lora_steps_, eval_tokens_, task_limit_};
}

QString MethodPanel::problem() const
{
    return first_problem(numberBoxes());
}

void MethodPanel::showProblem()
{
    const QString p = problem();
    problem_->setText(p.isEmpty() ? QString() : "Not run while " + p + ".");
    problem_->setVisible(!p.isEmpty());
}

void MethodPanel::run()
{
    showProblem();
    if (!problem().isEmpty())
        return; // said in place, in red; nothing is queued
    emit runRequested();
}

void MethodPanel::showOptionsFor(const QString& method)
{
    static const QHash<QString, int> page_of{{"pca", 0}, {"svd", 0},     {"tt", 1},
                                             {"lle", 2}, {"fourier", 3}, {"flat", 4}};
    options_->setCurrentIndex(page_of.value(method, 0));
    const auto* m = find_method(method.toStdString()); // the registry says what each method takes
    const bool embedding = !m || m->part == CompressedPart::TokenEmbedding;
    lora_->setVisible(embedding);
    lora_rank_->setVisible(embedding && lora_->isChecked());
    lora_steps_->setVisible(embedding && lora_->isChecked());
    const QString host = target_->currentText().trimmed();
    ssh_config_->setVisible(host != kThisComputer && host != kSlurm && !host.isEmpty());
    remote_cli_->setVisible(ssh_config_->isVisibleTo(this));
    for (QWidget* w : std::initializer_list<QWidget*>{slurm_partition_, slurm_time_, slurm_array_limit_})
        w->setVisible(host == kSlurm);
    frequency_row_->setVisible(m && m->needs_frequency_text);
    calibration_row_->setVisible(m && m->needs_calibration_text);
    train_row_->setVisible(embedding && lora_->isChecked());
    const QString task = task_->currentData().toString();
    task_file_row_->setVisible(task == "sst2" || task == "mc");
    task_limit_->setVisible(task != "none");
    showProblem(); // a hidden box's problem no longer stops a run
    showNotes();
}

QString MethodPanel::note() const
{
    // lle splits common from rare by the frequency text: evaluated on the same
    // text, every evaluated token was counted there, so the rare rows it rebuilds
    // are the ones the evaluation sees least (or never).
    if (method() != "lle")
        return {};
    const QString freq = frequency_text_->text().trimmed(), eval = eval_text_->text().trimmed();
    const bool same = freq.isEmpty() || eval.isEmpty()
                          ? freq.isEmpty() && eval.isEmpty()
                          : QDir::cleanPath(QFileInfo(freq).absoluteFilePath()) ==
                                QDir::cleanPath(QFileInfo(eval).absoluteFilePath());
    return same ? QString("The frequency text is also the evaluation text: tokens rare in it are rare in "
                          "what is evaluated, so the rebuilt rows are hardly evaluated. Evaluate on "
                          "another text to measure them.")
                : QString();
}

void MethodPanel::showNotes()
{
    const QString n = note();
    note_->setText(n);
    note_->setVisible(!n.isEmpty());
}

void MethodPanel::saveSettings() const
{
    QSettings s;
    s.beginGroup("method");
    const auto r = request();
    s.setValue("method", method());
    s.setValue("rank", rank_->value());
    s.setValue("eps", r.eps);
    s.setValue("keep_ratio", r.keep_ratio);
    s.setValue("k", static_cast<int>(r.k));
    s.setValue("mlp", mlp_->currentText());
    s.setValue("steps", steps_->value());
    s.setValue("remaining", r.remaining);
    s.setValue("allocation", allocation_->currentText());
    s.setValue("samples", samples_->value());
    s.setValue("seqlen", seqlen_->value());
    s.setValue("lora", lora_->isChecked());
    s.setValue("divergence", divergence_->isChecked());
    s.setValue("task", task_->currentData().toString());
    s.setValue("task_data", task_data_->text());
    s.setValue("task_limit", task_limit_->value());
    s.setValue("lora_rank", lora_rank_->value());
    s.setValue("lora_steps", lora_steps_->value());
    s.setValue("frequency_text", frequency_text_->text());
    s.setValue("calibration_text", calibration_text_->text());
    s.setValue("train_text", train_text_->text());
    s.setValue("eval_text", eval_text_->text());
    s.setValue("eval_tokens", eval_tokens_->value());
    s.setValue("ssh_config", ssh_config_->text());
    s.setValue("remote_cli", remote_cli_->text());
    s.setValue("slurm_partition", slurm_partition_->text());
    s.setValue("slurm_time", slurm_time_->text());
    s.setValue("slurm_array_limit", slurm_array_limit_->value());
    QStringList hosts;
    for (int i = 0; i < target_->count(); ++i)
        if (target_->itemText(i) != kThisComputer && target_->itemText(i) != kSlurm)
            hosts << target_->itemText(i);
    const QString host = target_->currentText().trimmed();
    if (host != kThisComputer && host != kSlurm && !host.isEmpty() && !hosts.contains(host))
        hosts.prepend(host);
    s.setValue("hosts", hosts.mid(0, 8));
    s.setValue("host", host == kThisComputer ? QString() : host);
}

void MethodPanel::restoreSettings()
{
    QSettings s;
    s.beginGroup("method");
    for (const QString& host : s.value("hosts").toStringList())
        if (target_->findText(host) < 0)
            target_->addItem(host);
    const QString m = s.value("method", "pca").toString();
    if (methods().contains(m))
        setMethod(m);
    rank_->setValue(s.value("rank", rank_->value()).toInt());
    eps_->setValue(s.value("eps", eps_->value()).toDouble());
    keep_ratio_->setValue(s.value("keep_ratio", keep_ratio_->value()).toDouble());
    neighbours_->setValue(s.value("k", neighbours_->value()).toInt());
    mlp_->setCurrentText(s.value("mlp", mlp_->currentText()).toString());
    steps_->setValue(s.value("steps", steps_->value()).toInt());
    remaining_->setValue(s.value("remaining", remaining_->value()).toDouble());
    allocation_->setCurrentText(s.value("allocation", allocation_->currentText()).toString());
    samples_->setValue(s.value("samples", samples_->value()).toInt());
    seqlen_->setValue(s.value("seqlen", seqlen_->value()).toInt());
    lora_->setChecked(s.value("lora", false).toBool());
    divergence_->setChecked(s.value("divergence", false).toBool());
    const int task = task_->findData(s.value("task", "none").toString());
    task_->setCurrentIndex(
        task < 0 || !qobject_cast<QStandardItemModel*>(task_->model())->item(task)->isEnabled() ? 0 : task);
    task_data_->setText(s.value("task_data").toString());
    task_limit_->setValue(s.value("task_limit", task_limit_->value()).toInt());
    lora_rank_->setValue(s.value("lora_rank", lora_rank_->value()).toInt());
    lora_steps_->setValue(s.value("lora_steps", lora_steps_->value()).toInt());
    frequency_text_->setText(s.value("frequency_text").toString());
    calibration_text_->setText(s.value("calibration_text").toString());
    train_text_->setText(s.value("train_text").toString());
    eval_text_->setText(s.value("eval_text").toString());
    eval_tokens_->setValue(s.value("eval_tokens", eval_tokens_->value()).toInt());
    ssh_config_->setText(s.value("ssh_config").toString());
    remote_cli_->setText(s.value("remote_cli").toString());
    slurm_partition_->setText(s.value("slurm_partition").toString());
    slurm_time_->setText(s.value("slurm_time").toString());
    slurm_array_limit_->setValue(s.value("slurm_array_limit", 0).toInt());
    setHost(s.value("host").toString());
}

} // namespace embedlab::app

#include "method_panel.hpp"

#include "checked_spin_box.hpp"

#include "embedlab/experiment_request.hpp"
#include "embedlab/quant_types.hpp"

#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QStackedWidget>
#include <QStandardItemModel>
#include <QVBoxLayout>

namespace embedlab::app {

namespace {

const QString kThisComputer = "This computer";
const QString kSlurm = "Slurm cluster"; // this machine is a login node (sbatch on PATH)
const QString kAddHost = "Add ssh host...";

QSpinBox* spin(QWidget* parent, const QString& prefix, int lo, int hi, int value, const QString& tip)
{
    auto* s = new CheckedSpinBox(parent);
    s->setPrefix(prefix);
    s->setRange(lo, hi);
    s->setValue(value);
    s->setToolTip(tip);
    return s;
}

} // namespace

QStringList MethodPanel::methods()
{
    QStringList names;
    for (const auto& m : method_registry())
        names << m.name;
    return names;
}

MethodPanel::MethodPanel(QWidget* parent)
    : QWidget(parent), method_(new QComboBox(this)), options_(new QStackedWidget(this)),
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
    // The common rows' number boxes (the pages' are made with their pages).
    for (const auto& [field, box] : fieldBoxes()) {
        box->setObjectName(QString::fromStdString(field)); // tests and QSettings-free lookups
        box->setToolTip(box->toolTip() + "\nA sweep runs once per value: a list 8,16,32 or a range "
                                         "start:stop:step, 8:128:8");
        if (auto* s = qobject_cast<CheckedSpinBox*>(box)) {
            s->setSweepable(true);
            connect(s, &QSpinBox::textChanged, this, &MethodPanel::showRuns);
            connect(s, &CheckedSpinBox::problemChanged, this, &MethodPanel::showProblem);
        }
    }
    lora_->setToolTip("Train LoRA adapters on the compressed model (next-token loss on the training text)");
    divergence_->setToolTip("Also measure KL(P_original || P_compressed) and top-1 agreement on the "
                            "evaluated tokens (the KL and top-1 columns; about twice the evaluation time)");
    lora_steps_->setSuffix(" steps");
    eval_tokens_->setSuffix(" tokens");
    eval_tokens_->setSpecialValueText("all tokens");
    target_->setEditable(true);
    target_->addItem(kThisComputer);
    target_->addItem(kSlurm);
    target_->addItem(kAddHost); // ssh hosts go above it
    target_->setItemData(target_->count() - 1,
                         "Run on an ssh host: [user@]host[:port] or a name from the ssh config",
                         Qt::ToolTipRole);
    slurm_partition_->setObjectName("slurm_partition");
    slurm_partition_->setPlaceholderText("partition: the cluster's default");
    slurm_partition_->setToolTip("sbatch --partition (empty: the cluster's default partition)");
    slurm_time_->setObjectName("slurm_time");
    slurm_time_->setPlaceholderText("time: the partition's limit");
    slurm_time_->setToolTip("sbatch --time: minutes, HH:MM:SS or D-HH:MM:SS (empty: the partition's limit)");
    for (QLineEdit* e : {slurm_partition_, slurm_time_}) {
        e->setMinimumWidth(80); // the placeholder elides; the tooltip says it all
        connect(e, &QLineEdit::textChanged, this, &MethodPanel::showProblem);
    }
    slurm_array_limit_->setObjectName("slurm_array_limit");
    slurm_array_limit_->setSpecialValueText("no task limit");
    slurm_array_limit_->setPrefix("at most ");
    slurm_array_limit_->setSuffix(" at once");
    target_->setToolTip(
        "Where the job runs: this computer, or an ssh host ([user@]host[:port] or a name from\n"
        "the ssh config) with embedlab-cli installed (every method; see docs/remote.md), or a Slurm\n"
        "cluster whose login node this is (a job array task; see docs/remote.md, Slurm)");
    target_->setMinimumContentsLength(14);
    ssh_config_->setPlaceholderText("ssh config (default: ~/.ssh/config)");
    remote_cli_->setPlaceholderText("embedlab-cli");
    remote_cli_->setToolTip(
        "The worker on the host, when embedlab-cli is not on its PATH (remote run --remote-cli)");

    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel("Compress with", this));
    top->addWidget(method_);
    top->addWidget(lora_);
    top->addWidget(lora_rank_);
    top->addWidget(lora_steps_);
    top->addWidget(divergence_);
    top->addStretch(1);
    // Where it runs, and Run, on a row of their own: the ssh and Slurm fields take the
    // room the method's row leaves (issue 61: they widened the window past the screen).
    auto* where = new QHBoxLayout;
    where->addWidget(new QLabel("Run on", this));
    where->addWidget(target_);
    where->addWidget(ssh_config_, 1);
    where->addWidget(remote_cli_, 1);
    where->addWidget(slurm_partition_, 1);
    where->addWidget(slurm_time_, 1);
    where->addWidget(slurm_array_limit_);
    where->addStretch(0); // the room the fields (stretch 1) leave, before Run
    where->addWidget(run_);
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
    eval_row_ = textRow("Evaluate on", eval_text_, "Perplexity text (METHODS 0)");
    texts->addWidget(eval_row_);
    texts->addWidget(eval_tokens_);
    for (QLineEdit* e : {frequency_text_, calibration_text_, train_text_, eval_text_})
        e->setPlaceholderText(bundled);
    frequency_text_->setObjectName("freq_text");
    calibration_text_->setObjectName("calib_text");
    buildPages();    // each registry method's page, its fields' widgets
    buildChain(top); // Then..., its step and trim's page

    // A zero-shot task after the evaluation (tasks.hpp): the task accuracy column.
    task_->addItem("no task", "none");
    task_->addItem("SST-2 dev (GLUE)", "sst2-dev");
    task_->addItem("SST-2 file", "sst2");
    task_->addItem("multiple choice (JSONL)", "mc");
    // GLUE's other classification tasks: a sequence classifier's head answers them (tasks.hpp).
    for (const auto& [label, name] : {std::pair{"CoLA file (classifier)", "cola"},
                                      {"MRPC file (classifier)", "mrpc"},
                                      {"QQP file (classifier)", "qqp"},
                                      {"MNLI matched file (classifier)", "mnli"},
                                      {"MNLI mismatched file (classifier)", "mnli-mm"},
                                      {"QNLI file (classifier)", "qnli"},
                                      {"RTE file (classifier)", "rte"},
                                      {"WNLI file (classifier)", "wnli"}})
        task_->addItem(label, name);
    task_->setToolTip(
        "Also score a task on the compressed model and the original (the task acc column): zero-shot\n"
        "by log-likelihood as lm-evaluation-harness does, SST-2 (a GLUE TSV with sentence and label)\n"
        "or multiple choice (JSONL lines {\"context\", \"choices\", \"label\"}, e.g. PIQA, ARC); or, on a\n"
        "sequence classifier (BERT, DistilBERT), by its head on a GLUE task's own dev.tsv");
    if (sst2DevPath().isEmpty()) {
        auto* item = qobject_cast<QStandardItemModel*>(task_->model())->item(1);
        item->setEnabled(false);
        item->setToolTip("../shared/data/glue/SST-2/dev.tsv not found; choose an SST-2 file");
    }
    task_->setObjectName("task");
    task_data_->setObjectName("task_data");
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
    connect(task_, &QComboBox::currentIndexChanged, this, [this] { showOptionsFor(method()); });

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(top);
    auto* steps = new QHBoxLayout; // a chain's trim beside its method's page
    steps->addWidget(trim_page_);
    steps->addWidget(options_, 1);
    layout->addLayout(steps);
    layout->addLayout(texts);
    // The task and where it runs share a row (issue 61: the tab fits 768 px high).
    task_row->addLayout(where, 1);
    layout->addLayout(task_row);
    layout->addWidget(chain_label_);
    layout->addWidget(problem_);
    layout->addWidget(note_);
    note_->setStyleSheet("color: #8a5a00;");
    note_->setWordWrap(true);
    note_->hide();
    for (QLineEdit* e : {frequency_text_, eval_text_})
        connect(e, &QLineEdit::textChanged, this, &MethodPanel::showNotes);
    connect(method_, &QComboBox::currentTextChanged, this, &MethodPanel::showOptionsFor);
    connect(method_, &QComboBox::currentTextChanged, this, &MethodPanel::methodChanged);
    connect(lora_, &QCheckBox::toggled, this, [this] { showOptionsFor(method()); });
    connect(target_, &QComboBox::currentTextChanged, this, [this](const QString& text) {
        if (text != kAddHost)
            last_target_ = text;
        showOptionsFor(method());
    });
    connect(target_, &QComboBox::currentIndexChanged, this, [this](int index) {
        if (target_->itemText(index) == kAddHost)
            addHost();
    });
    run_->setObjectName("run");
    connect(run_, &QPushButton::clicked, this, &MethodPanel::run);
    restoreSettings();
    showApplies();
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

void MethodPanel::setEvaluation(Evaluation kind, const QString& model)
{
    evaluation_ = kind;
    const QString bundled = " (empty: the bundled sample text)";
    QString text, kl;
    switch (kind) {
    case Evaluation::Perplexity:
        text = "Perplexity text (METHODS 0)" + bundled;
        kl =
            "Also measure KL(P_original || P_compressed) and top-1 agreement on the evaluated tokens (the KL "
            "and top-1 columns; about twice the evaluation time)";
        break;
    case Evaluation::PseudoPerplexity:
        text = model +
               " is an encoder with a masked-LM head: its pseudo-perplexity on this text, each token "
               "masked in turn (as embedlab-cli eval)" +
               bundled;
        kl = "Also measure KL(P_original || P_compressed) of the masked-token predictions at the same masked "
             "positions (the KL column)";
        break;
    case Evaluation::None:
        text = model + " is an encoder without a masked-LM head: it has no perplexity to evaluate. Its rows "
                       "are scored by the cosine of the rebuilt table rows; the Compare tab compares its "
                       "sentence embeddings";
        kl = model + " is an encoder without a masked-LM head: it predicts no tokens to compare, so + KL vs "
                     "original does not apply; its rows are scored by the cosine of the rebuilt table rows "
                     "and the Compare tab compares its sentence embeddings";
        break;
    }
    eval_text_->setToolTip(text);
    eval_row_->setToolTip(text);
    eval_tokens_->setToolTip(text);
    divergence_->setToolTip(kl);
    eval_row_->setEnabled(kind != Evaluation::None);
    eval_tokens_->setEnabled(kind != Evaluation::None);
}

CompressionRequest MethodPanel::request() const
{
    return request(method());
}

QString MethodPanel::textOf(const QLineEdit* edit) const
{
    const QString text = edit->text().trimmed();
    return text.isEmpty() ? QString::fromStdString(default_sample_text()) : text;
}

void MethodPanel::showText(QLineEdit* edit, const std::string& path)
{
    edit->setText(path == default_sample_text() ? QString() : QString::fromStdString(path));
}

CompressionRequest MethodPanel::request(const QString& name) const
{
    return request(name, {});
}

CompressionRequest MethodPanel::request(const QString& name, const std::map<std::string, double>& with) const
{
    // A box's value, or the sweep's value for its field.
    const auto v = [&](const char* field, double shown) {
        const auto it = with.find(field);
        return it == with.end() ? shown : it->second;
    };
    const auto n = [&](const char* field, const QSpinBox* box) {
        return static_cast<int64_t>(v(field, box->value()));
    };
    CompressionRequest r;
    r.method = name.toStdString();
    const auto* m = find_method(r.method);
    if (const auto* p = page(r.method)) // its fields, as the registry lists them
        readPage(*p, r, with);
    if (m && m->lora && lora_->isChecked()) {
        r.lora_rank = n("lora_rank", lora_rank_);
        r.lora_steps = n("lora_steps", lora_steps_);
        r.train_text = textOf(train_text_).toStdString();
    }
    r.eval_text = textOf(eval_text_).toStdString();
    r.eval_tokens = n("eval_tokens", eval_tokens_);
    r.divergence = divergence_->isChecked();
    const QString task = task_->currentData().toString();
    if (task == "sst2-dev") {
        r.task = "sst2";
        r.task_data = sst2DevPath().toStdString();
    } else if (task != "none") { // a task file: sst2, mc or a GLUE classification task
        r.task = task.toStdString();
        r.task_data = task_data_->text().trimmed().toStdString();
    }
    if (!r.task.empty())
        r.task_limit = n("task_limit", task_limit_);
    return r;
}

RunTarget MethodPanel::target() const
{
    RunTarget t;
    const QString host = target_->currentText().trimmed();
    if (host == kSlurm) {
        t.slurm = true;
        t.slurm_partition = slurm_partition_->text().trimmed().toStdString();
        t.slurm_time = slurm_time_->text().trimmed().toStdString();
        t.slurm_array_limit = slurm_array_limit_->value();
    } else if (host != kThisComputer && host != kAddHost && !host.isEmpty()) {
        t.host = host.toStdString();
        t.ssh_config = ssh_config_->text().trimmed().toStdString();
        t.remote_cli = remote_cli_->text().trimmed().toStdString();
    }
    return t;
}

void MethodPanel::setTarget(const RunTarget& t)
{
    setHost(t.slurm ? kSlurm : QString::fromStdString(t.host));
    ssh_config_->setText(QString::fromStdString(t.ssh_config));
    remote_cli_->setText(QString::fromStdString(t.remote_cli));
    if (t.slurm) {
        slurm_partition_->setText(QString::fromStdString(t.slurm_partition));
        slurm_time_->setText(QString::fromStdString(t.slurm_time));
        slurm_array_limit_->setValue(t.slurm_array_limit);
    }
}

void MethodPanel::setRequest(const CompressionRequest& r)
{
    const QString name = QString::fromStdString(r.method);
    setMethod(name);
    const auto* m = find_method(r.method);
    // Fields at the engine's "not set" values (rank 0, no steps, ...) leave their boxes.
    if (const auto* p = page(r.method))
        showPage(*p, r);
    if (m && m->lora) { // flat's request says nothing of the box
        lora_->setChecked(r.lora_rank > 0);
        if (r.lora_rank > 0) {
            lora_rank_->setValue(static_cast<int>(r.lora_rank));
            lora_steps_->setValue(static_cast<int>(r.lora_steps));
            showText(train_text_, r.train_text);
        }
    }
    divergence_->setChecked(r.divergence);
    const QString task_data = QString::fromStdString(r.task_data);
    const bool dev = r.task == "sst2" && !task_data.isEmpty() && task_data == sst2DevPath();
    task_->setCurrentIndex(std::max(0, task_->findData(r.task.empty() ? QString("none")
                                                       : dev          ? QString("sst2-dev")
                                                                      : QString::fromStdString(r.task))));
    task_data_->setText(dev ? QString() : task_data);
    if (!r.task.empty())
        task_limit_->setValue(static_cast<int>(r.task_limit));
    showText(eval_text_, r.eval_text);
    eval_tokens_->setValue(static_cast<int>(r.eval_tokens));
}

void MethodPanel::setLegacyChoice(const QVariantMap& v)
{
    auto number = [&](const char* key, auto set) {
        if (v.contains(key))
            set(v.value(key));
    };
    auto text = [&](const char* key, QLineEdit* edit) {
        if (v.contains(key))
            edit->setText(v.value(key).toString()); // "" was the bundled sample text then too
    };
    if (const QString m = v.value("method").toString(); methods().contains(m))
        setMethod(m);
    // Each page's field of the key's name (rank, eps, keep_ratio, k, mlp, steps, remaining,
    // target_ratio, no_mlp, allocation, samples, seqlen); a number not above 0 was "not set".
    for (const auto& p : pages_)
        for (const auto& f : p.fields) {
            const QString key = QString::fromStdString(f.field);
            if (!v.contains(key) || f.widget == frequency_text_ || f.widget == calibration_text_)
                continue;
            const QVariant x = v.value(key);
            if (auto* s = qobject_cast<QSpinBox*>(f.widget)) {
                if (x.toInt() > 0)
                    s->setValue(x.toInt());
            } else if (auto* d = qobject_cast<QDoubleSpinBox*>(f.widget)) {
                if (x.toDouble() > 0)
                    d->setValue(x.toDouble());
            } else if (auto* c = qobject_cast<QCheckBox*>(f.widget)) {
                c->setChecked(x.toBool());
            } else if (auto* c = qobject_cast<QComboBox*>(f.widget)) {
                if (const int i = c->findData(x.toString()); i >= 0)
                    c->setCurrentIndex(i);
            }
        }
    // Settings said "lora" (the box) and its rank; a session's lora_rank 0 was off.
    if (v.contains("lora"))
        lora_->setChecked(v.value("lora").toBool());
    else if (v.contains("lora_rank"))
        lora_->setChecked(v.value("lora_rank").toInt() > 0);
    number("lora_rank", [&](const QVariant& x) {
        if (x.toInt() > 0)
            lora_rank_->setValue(x.toInt());
    });
    number("lora_steps", [&](const QVariant& x) { lora_steps_->setValue(x.toInt()); });
    if (v.contains("divergence"))
        divergence_->setChecked(v.value("divergence").toBool());
    if (v.contains("task")) {
        // Settings kept the box's choice (none, sst2-dev, sst2, mc); a session the
        // request's task (sst2, mc, "") with the SST-2 dev set named by its path.
        const QString task = v.value("task").toString(), data = v.value("task_data").toString();
        const QString choice = task.isEmpty() ? QString("none")
                               : task == "sst2" && !data.isEmpty() && data == sst2DevPath()
                                   ? QString("sst2-dev")
                                   : task;
        const int index = task_->findData(choice);
        task_->setCurrentIndex(
            index < 0 || !qobject_cast<QStandardItemModel*>(task_->model())->item(index)->isEnabled()
                ? 0
                : index);
        task_data_->setText(choice == "sst2-dev" ? QString() : data);
    }
    number("task_limit", [&](const QVariant& x) { task_limit_->setValue(x.toInt()); });
    text("frequency_text", frequency_text_);
    text("calibration_text", calibration_text_);
    text("train_text", train_text_);
    text("eval_text", eval_text_);
    number("eval_tokens", [&](const QVariant& x) { eval_tokens_->setValue(x.toInt()); });
    text("ssh_config", ssh_config_);
    text("remote_cli", remote_cli_);
    text("slurm_partition", slurm_partition_);
    text("slurm_time", slurm_time_);
    number("slurm_array_limit", [&](const QVariant& x) { slurm_array_limit_->setValue(x.toInt()); });
    if (v.contains("host"))
        setHost(v.value("host").toString());
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
    const auto* box = qobject_cast<QSpinBox*>(this->box(method().toStdString(), "rank"));
    if (!box)
        box = qobject_cast<QSpinBox*>(this->box("pca", "rank"));
    return box ? box->value() : 0;
}
double MethodPanel::eps() const
{
    const auto* box = qobject_cast<QDoubleSpinBox*>(this->box("tt", "eps"));
    return box ? box->value() : 0;
}
void MethodPanel::setMethod(const QString& method)
{
    method_->setCurrentText(method);
}
void MethodPanel::setRank(int k)
{
    for (const auto& p : pages_)
        for (const auto& f : p.fields)
            if (f.field == "rank" && f.doc->hi_is_width)
                if (auto* s = qobject_cast<QSpinBox*>(f.widget))
                    s->setValue(k);
}
void MethodPanel::setEps(double eps)
{
    if (auto* box = qobject_cast<QDoubleSpinBox*>(this->box("tt", "eps")))
        box->setValue(eps);
}

void MethodPanel::setHost(const QString& host)
{
    const QString chosen = host.isEmpty() || host == kAddHost ? kThisComputer : host;
    if (const int i = target_->findText(chosen); i >= 0)
        target_->setCurrentIndex(i); // the item itself: the list's index leaves "Add ssh host..."
    else
        target_->setCurrentText(chosen); // a host not listed yet, in the editable box
}

void MethodPanel::addHost()
{
    // Back to the choice before first: the entry is not a target, and an item inserted
    // above it would move it (and choose it again).
    const QString before = last_target_;
    setHost(before == kThisComputer ? QString() : before);
    bool ok = false;
    const QString host =
        QInputDialog::getText(this, "Add ssh host",
                              "[user@]host[:port] or a name from the ssh config; the host runs the job with "
                              "its embedlab-cli (docs/remote.md)",
                              QLineEdit::Normal, {}, &ok)
            .trimmed();
    if (!ok || host.isEmpty() || host == kThisComputer || host == kSlurm || host == kAddHost)
        return;
    if (target_->findText(host) < 0) {
        const QSignalBlocker quiet(target_); // the entry moves down: not a new choice
        target_->insertItem(target_->count() - 1, host);
    }
    setHost(host);
}

QString MethodPanel::slurmProblem() const
{
    if (!slurm_time_->isVisibleTo(this))
        return {};
    // What sbatch --time and --partition take; empty: the cluster's defaults.
    static const QRegularExpression time(
        "^(\\d+-\\d{1,2}(:\\d{1,2}){0,2}|\\d+(:\\d{1,2}){0,2}|UNLIMITED|INFINITE)$");
    static const QRegularExpression partition("^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$");
    const QString t = slurm_time_->text().trimmed(), p = slurm_partition_->text().trimmed();
    if (!t.isEmpty() && !time.match(t).hasMatch())
        return QString("the Slurm time limit '%1' is not minutes, HH:MM:SS or D-HH:MM:SS").arg(t);
    if (!p.isEmpty() && !partition.match(p).hasMatch())
        return QString("the Slurm partition '%1' is not a partition name (or a comma list of them)").arg(p);
    return {};
}

QList<QWidget*> MethodPanel::numberBoxes() const
{
    QList<QWidget*> boxes;
    for (const auto& [field, box] : fieldBoxes())
        boxes << box;
    return boxes;
}

std::vector<std::pair<std::string, QAbstractSpinBox*>> MethodPanel::fieldBoxes() const
{
    // Each number box is the request field of its name (experiment_request.hpp): the
    // pages' (a field not applying with the others disabled, and so not part of a run),
    // then the common rows'.
    std::vector<std::pair<std::string, QAbstractSpinBox*>> boxes;
    for (const auto& p : pages_)
        for (const auto& f : p.fields)
            if (auto* box = qobject_cast<QAbstractSpinBox*>(f.widget); box && box->isEnabled())
                boxes.emplace_back(f.field, box);
    boxes.insert(boxes.end(), {{"lora_rank", lora_rank_},
                               {"lora_steps", lora_steps_},
                               {"eval_tokens", eval_tokens_},
                               {"task_limit", task_limit_}});
    return boxes;
}

QString MethodPanel::problem() const
{
    QList<QWidget*> boxes = numberBoxes();
    for (const auto& f : trim_fields_) // a hidden page's boxes are skipped
        if (qobject_cast<QAbstractSpinBox*>(f.widget))
            boxes << f.widget;
    if (const QString numbers = first_problem(boxes, this); !numbers.isEmpty())
        return numbers;
    if (const QString lists = listProblem(); !lists.isEmpty())
        return lists;
    if (const int64_t runs = sweepSize(); runs > kMaxSweepRuns)
        return QString("the sweep has %1 runs (at most %2: sweep fewer values)").arg(runs).arg(kMaxSweepRuns);
    if (chainShown()) {
        if (sweepSize() > 1)
            return "a chain runs one setting: type one value in each box, not a sweep";
        if (const QString chain = chainProblem(); !chain.isEmpty())
            return chain; // the engine's refusal, as the CLI's --then and a JSON pipeline get it
    }
    return slurmProblem();
}

void MethodPanel::showProblem()
{
    const QString slurm = slurmProblem();
    slurm_time_->setStyleSheet(slurm.contains("time limit") ? "QLineEdit { border: 2px solid #b00000; }"
                                                            : "");
    slurm_partition_->setStyleSheet(slurm.contains("partition '") ? "QLineEdit { border: 2px solid #b00000; }"
                                                                  : "");
    const QString p = problem();
    const bool engine_refusal = !p.isEmpty() && chainShown() && p == chainProblem(); // its own sentence
    problem_->setText(p.isEmpty()      ? QString()
                      : engine_refusal ? "Not run: " + p
                                       : "Not run while " + p + ".");
    problem_->setVisible(!p.isEmpty());
    if (chain_label_) { // the chain in words follows every field
        const bool chain = chainShown();
        chain_label_->setText(chain ? "Chain: " + chainLabel() + " (one job, one record)" : QString());
        chain_label_->setVisible(chain);
    }
    showRuns();
}

void MethodPanel::showOptionsFor(const QString& chosen)
{
    // A chain shows its registry method's page (trim's is its own); a method alone, its own.
    const QString method = then_row_ ? registryStep() : chosen;
    for (int i = 0; i < static_cast<int>(pages_.size()); ++i)
        if (pages_[i].method == method.toStdString())
            options_->setCurrentIndex(i);
    // First among the stack's children (the stack raised it to the last): findChild("rank")
    // finds the shown page's box of a field several pages have.
    if (QWidget* shown = options_->currentWidget())
        shown->lower();
    const auto* m = find_method(method.toStdString()); // the registry says what each method takes
    const bool embedding = m ? m->part == CompressedPart::TokenEmbedding : !chainTrims();
    lora_->setVisible(embedding);
    lora_rank_->setVisible(embedding && lora_->isChecked());
    lora_steps_->setVisible(embedding && lora_->isChecked());
    const QString host = target_->currentText().trimmed();
    ssh_config_->setVisible(host != kThisComputer && host != kSlurm && host != kAddHost && !host.isEmpty());
    remote_cli_->setVisible(ssh_config_->isVisibleTo(this));
    for (QWidget* w : std::initializer_list<QWidget*>{slurm_partition_, slurm_time_, slurm_array_limit_})
        w->setVisible(host == kSlurm);
    // trim reads the frequency text too (its page holds the shared row's field).
    frequency_row_->setVisible((m && m->needs_frequency_text) || chainTrims());
    calibration_row_->setVisible(m && m->needs_calibration_text);
    train_row_->setVisible(embedding && lora_->isChecked());
    const QString task = task_->currentData().toString();
    task_file_row_->setVisible(task != "none" && task != "sst2-dev");
    task_limit_->setVisible(task != "none");
    if (chain_label_)
        showChain(); // and showProblem: a hidden box's problem no longer stops a run
    else
        showProblem();
    showNotes();
}

QString MethodPanel::note() const
{
    // lle splits common from rare by the frequency text: evaluated on the same
    // text, every evaluated token was counted there, so the rare rows it rebuilds
    // are the ones the evaluation sees least (or never).
    const auto* m = find_method(method().toStdString());
    if (!m || !m->needs_frequency_text)
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

// Settings: each method's request as request_json (so every page keeps its values),
// the chosen method, the target as target_json and the ssh hosts used.
void MethodPanel::saveSettings() const
{
    QSettings s;
    s.beginGroup("method");
    nlohmann::ordered_json requests = nlohmann::ordered_json::array();
    for (const auto& p : pages_)
        requests.push_back(request_json(request(QString::fromStdString(p.method))));
    s.setValue("requests", QString::fromStdString(requests.dump()));
    s.setValue("method", method());
    s.setValue("target", QString::fromStdString(target_json(target()).dump()));
    QStringList hosts;
    for (int i = 0; i < target_->count(); ++i)
        if (target_->itemText(i) != kThisComputer && target_->itemText(i) != kSlurm &&
            target_->itemText(i) != kAddHost)
            hosts << target_->itemText(i);
    const QString host = target_->currentText().trimmed();
    if (host != kThisComputer && host != kSlurm && host != kAddHost && !host.isEmpty() &&
        !hosts.contains(host))
        hosts.prepend(host);
    s.setValue("hosts", hosts.mid(0, 8));
}

namespace {

// A stored request as the engine reads it; a task whose file was never chosen
// (a choice the panel holds but a request cannot) is dropped rather than the rest.
std::optional<CompressionRequest> stored_request(nlohmann::ordered_json j)
{
    try {
        return stored_request_from_json(j);
    } catch (const std::exception&) {
    }
    for (const char* key : {"task", "task_data", "task_limit"})
        j.erase(key);
    try {
        return stored_request_from_json(j);
    } catch (const std::exception&) {
        return std::nullopt; // that page keeps its initial values
    }
}

} // namespace

void MethodPanel::restoreSettings()
{
    QSettings s;
    s.beginGroup("method");
    for (const QString& host : s.value("hosts").toStringList())
        if (target_->findText(host) < 0)
            target_->insertItem(target_->count() - 1, host); // above "Add ssh host..."
    if (!s.contains("requests")) { // none yet, or the keys of the version before requests
        QVariantMap legacy;
        for (const QString& key : s.childKeys())
            if (key != "hosts")
                legacy.insert(key, s.value(key));
        if (!legacy.isEmpty())
            setLegacyChoice(legacy);
        return;
    }
    const auto requests =
        nlohmann::ordered_json::parse(s.value("requests").toString().toStdString(), nullptr, false);
    if (requests.is_array())
        for (const auto& j : requests)
            if (const auto r = stored_request(j))
                setRequest(*r);
    if (const QString m = s.value("method").toString(); methods().contains(m))
        setMethod(m);
    try {
        setTarget(target_from_json(
            nlohmann::ordered_json::parse(s.value("target", "{}").toString().toStdString())));
    } catch (const std::exception&) {
        setTarget({}); // this computer
    }
}

} // namespace embedlab::app

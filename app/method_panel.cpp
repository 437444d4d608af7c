#include "method_panel.hpp"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>

namespace embedlab::app {

MethodPanel::MethodPanel(QWidget* parent)
    : QWidget(parent), method_(new QComboBox(this)), rank_(new QSpinBox(this)),
      eps_(new QDoubleSpinBox(this)), run_(new QPushButton("Run", this))
{
    method_->addItems({"pca", "svd", "tt"});
    method_->setToolTip("pca: centred low rank (METHODS 1); svd: uncentred; tt: per-token Tensor-Train (5)");
    rank_->setPrefix("rank k = ");
    rank_->setRange(1, 1024);
    rank_->setValue(32);
    eps_->setPrefix("eps = ");
    eps_->setRange(0.01, 0.99);
    eps_->setSingleStep(0.05);
    eps_->setDecimals(2);
    eps_->setValue(0.3);
    eps_->setToolTip("TT-SVD accuracy: per-row relative error bound; the shape is the most balanced of d");
    connect(method_, &QComboBox::currentTextChanged, this, &MethodPanel::showOptionsFor);
    connect(run_, &QPushButton::clicked, this, &MethodPanel::run);
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(new QLabel("Compress the embedding with", this));
    layout->addWidget(method_);
    layout->addWidget(rank_);
    layout->addWidget(eps_);
    layout->addWidget(run_);
    layout->addWidget(
        new QLabel("and evaluate perplexity on the first 4096 tokens of the bundled sample text", this), 1);
    showOptionsFor(method_->currentText());
}

void MethodPanel::setDimension(int d)
{
    rank_->setRange(1, std::max(d, 1));
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

void MethodPanel::run()
{
    emit runRequested(method(), rank(), eps());
}

void MethodPanel::showOptionsFor(const QString& method)
{
    rank_->setVisible(method != "tt");
    eps_->setVisible(method == "tt");
}

} // namespace embedlab::app
